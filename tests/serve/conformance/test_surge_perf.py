"""`surge perf`, the project's own load generator, against `surge serve`.

Over HTTP and gRPC, in concurrency and request-rate mode: every request it counts as answered
reached the model, and refused requests are counted as failures (and fail the run). In process
(no network), it loads the repository itself and reports the batch size its batcher formed.
"""
import json
import os
import subprocess
import urllib.request

import pytest

from conftest import add_model


def inferences(server):
    url = f"http://{server.http_url}/v2/models/bert/stats"
    with urllib.request.urlopen(url, timeout=10) as r:
        return int(json.load(r)["model_stats"][0]["inference_count"])


def run_perf(server, protocol, seq, *extra):
    url = server.http_url if protocol == "http" else server.grpc_url
    cmd = [os.environ["SURGE_BIN"], "perf", "-m", "bert", "-u", url, "-i", protocol, "--json",
           "-p", "500", "--warmup-ms", "100"]
    for name in ("input_ids", "attention_mask", "token_type_ids"):
        cmd += ["--shape", f"{name}:{seq}"]
    r = subprocess.run(cmd + list(extra), capture_output=True, text=True, timeout=120)
    lines = r.stdout.strip().splitlines()
    return r, json.loads(lines[-1])["results"] if lines else []


@pytest.mark.parametrize("protocol", ["http", "grpc"])
@pytest.mark.parametrize("mode", [
    ["--concurrency-range", "1:4:3"],
    ["--request-rate-range", "40", "--request-distribution", "poisson"],
])
def test_answered_requests_reached_the_model(server, protocol, mode):
    before = inferences(server)
    r, steps = run_perf(server, protocol, 8, *mode)
    assert r.returncode == 0, r.stdout + r.stderr
    assert len(steps) == (2 if mode[0] == "--concurrency-range" else 1), steps
    for s in steps:
        assert s["ok"] > 0 and s["failed"] == 0, s
        assert 0 < s["p50_us"] <= s["p99_us"], s
    # Warm-up requests come on top of the counted ones.
    assert inferences(server) - before >= sum(s["ok"] for s in steps)


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_refused_requests_are_failures(server, protocol):
    # Sequences far longer than the model's profile allows: the server refuses every request.
    r, steps = run_perf(server, protocol, 4000, "--concurrency-range", "2")
    assert r.returncode == 1, r.stdout + r.stderr
    assert steps and steps[0]["ok"] == 0 and steps[0]["failed"] > 0, steps


def test_health_endpoint_load(server):
    r, steps = run_perf(server, "http", 8, "--health", "--concurrency-range", "8")
    assert r.returncode == 0, r.stdout + r.stderr
    assert steps[0]["ok"] > 0 and steps[0]["failed"] == 0, steps


def test_in_process_drives_the_scheduler_without_the_network(tmp_path):
    repo = tmp_path / "models"
    add_model(repo, "bert", delay_us=100000)
    cmd = [os.environ["SURGE_BIN"], "perf", "-m", "bert", "--in-process", str(repo),
           "--model-cache-dir", str(tmp_path / "cache"), "--json", "-p", "500",
           "--warmup-ms", "100", "--concurrency-range", "4"]
    for name in ("input_ids", "attention_mask", "token_type_ids"):
        cmd += ["--shape", f"{name}:8"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["protocol"] == "in-process"
    step = out["results"][0]
    assert step["ok"] > 0 and step["failed"] == 0, step
    # Four requests always outstanding and a long batching delay: every batch holds all four.
    assert step["formed_batch"] == 4.0, step


@pytest.mark.parametrize("cmd", [
    ["perf", "-m", "bert", "--client-threads", "0"],
    ["serve", "--model-repository", ".", "--grpc-infer-thread-count", "0"],
    ["serve", "--model-repository", ".", "--http-thread-count", "-1"],
])
def test_thread_counts_out_of_range_are_refused_by_name(cmd):
    r = subprocess.run([os.environ["SURGE_BIN"], *cmd], capture_output=True, text=True,
                       timeout=30)
    assert r.returncode != 0
    assert cmd[-2] in r.stderr + r.stdout, r.stderr
