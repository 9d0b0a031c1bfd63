"""Starts `surge serve` on free loopback ports over a temporary Triton-layout repository.

SURGE_BIN names the binary (ctest sets it); the server is stopped when the session ends.
"""
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import threading
import time

import pytest

SRC = pathlib.Path(os.environ.get("SURGE_SOURCE_DIR", pathlib.Path(__file__).resolve().parents[3]))
FIXTURES = SRC / "tests" / "fixtures"
ONNX = FIXTURES / "models" / "bert_seqcls" / "model.torchscript.onnx"
REFERENCE = FIXTURES / "models" / "bert_seqcls" / "reference.json"

BERT_CONFIG = """
name: "{name}"
max_batch_size: 8
input [
  {{ name: "input_ids" data_type: TYPE_INT64 dims: [ -1 ] }},
  {{ name: "attention_mask" data_type: TYPE_INT64 dims: [ -1 ] }},
  {{ name: "token_type_ids" data_type: TYPE_INT64 dims: [ -1 ] }}
]
output [ {{ name: "logits" data_type: TYPE_FP32 dims: [ 3 ] label_filename: "labels.txt" }} ]
dynamic_batching {{ max_queue_delay_microseconds: {delay_us} {queue} }}
instance_group [ {{ count: 1 kind: KIND_CPU }} ]
{extra}
"""


def add_model(repo, name, versions=(1,), queue="", extra="", tokenizer=False, delay_us=2000):
    d = repo / name
    d.mkdir(parents=True, exist_ok=True)
    if tokenizer:
        extra += '\nparameters { key: "tokenizer" value: { string_value: "vocab.txt" } }'
        # The tiny model's vocabulary: the first 200 tokens of the fixture vocab.
        lines = (FIXTURES / "text" / "vocab.txt").read_text(encoding="utf-8").splitlines()[:200]
        (d / "vocab.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (d / "config.pbtxt").write_text(
        BERT_CONFIG.format(name=name, queue=queue, extra=extra, delay_us=delay_us))
    (d / "labels.txt").write_text("negative\nneutral\npositive\n")
    for v in versions:
        (d / str(v)).mkdir(exist_ok=True)
        shutil.copy(ONNX, d / str(v) / "model.onnx")
    return d


class Server:
    def __init__(self, proc, http, grpc, metrics, log):
        self.proc, self.http, self.grpc, self.metrics, self.log = proc, http, grpc, metrics, log

    @property
    def http_url(self):
        return f"127.0.0.1:{self.http}"

    @property
    def grpc_url(self):
        return f"127.0.0.1:{self.grpc}"


def start_server(repo, cache, *extra_args):
    binary = os.environ.get("SURGE_BIN")
    if not binary or not pathlib.Path(binary).exists():
        pytest.skip("SURGE_BIN does not name a built surge binary")
    args = [binary, "serve", "--model-repository", str(repo), "--http-address", "127.0.0.1",
            "--grpc-address", "127.0.0.1", "--metrics-address", "127.0.0.1", "--http-port", "0",
            "--grpc-port", "0", "--metrics-port", "0", "--model-cache-dir", str(cache),
            "--log-level", "warn", *extra_args]
    log = open(repo.parent / "server.log", "w")
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=log, text=True)
    line_holder = []

    def read_line():
        line_holder.append(proc.stdout.readline())

    t = threading.Thread(target=read_line, daemon=True)
    t.start()
    t.join(timeout=300)
    line = line_holder[0] if line_holder else ""
    if not line.startswith("surge serve: ready"):
        proc.kill()
        proc.wait()
        raise RuntimeError("surge serve did not start: " + (repo.parent / "server.log").read_text())
    fields = dict(kv.split("=") for kv in line.split()[3:])
    return Server(proc, int(fields["http"]), int(fields["grpc"]), int(fields["metrics"]), log)


def stop_server(server):
    server.proc.send_signal(signal.SIGTERM)
    try:
        rc = server.proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        server.proc.kill()
        rc = server.proc.wait()
    server.log.close()
    return rc


@pytest.fixture(scope="session")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("surge_serve")
    repo = root / "models"
    add_model(repo, "bert")
    add_model(repo, "bert_text", tokenizer=True)
    add_model(repo, "swap")
    add_model(repo, "tight", queue="default_queue_policy { max_queue_size: 1 }",
              extra="")
    s = start_server(repo, root / "cache", "--model-control-mode", "explicit", "--load-model", "*",
                     "--max-request-size-mb", "1")
    s.repo = repo
    yield s
    rc = stop_server(s)
    assert rc == 0, "surge serve exited with %d" % rc


@pytest.fixture(scope="session")
def reference():
    return json.loads(REFERENCE.read_text())
