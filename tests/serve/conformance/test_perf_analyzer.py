"""Triton's own load generator, perf_analyzer, run unmodified against `surge serve`.

perf_analyzer comes from the tritonclient wheel (scripts/setup puts it in .venv/bin). Each run
sweeps concurrency 1..2 over HTTP and gRPC on the fixture BERT and must finish with a CSV whose
rows report a positive throughput and the server-side queue/compute times that perf_analyzer reads
from the statistics extension.
"""
import csv
import json
import os
import pathlib
import shutil
import subprocess

import pytest

SEQ = 16


def perf_analyzer():
    candidates = [pathlib.Path(os.environ.get("SURGE_SOURCE_DIR", ".")) / ".venv" / "bin" /
                  "perf_analyzer", shutil.which("perf_analyzer")]
    for c in candidates:
        if c and pathlib.Path(c).exists():
            return str(c)
    pytest.skip("perf_analyzer is not installed (scripts/setup installs it into .venv/bin)")


def input_data(path):
    ids = [1] + [5 + 11 * i for i in range(SEQ - 2)] + [2]  # the fixture vocabulary has 200 ids
    row = {
        "input_ids": {"content": ids, "shape": [SEQ]},
        "attention_mask": {"content": [1] * SEQ, "shape": [SEQ]},
        "token_type_ids": {"content": [0] * SEQ, "shape": [SEQ]},
    }
    path.write_text(json.dumps({"data": [row]}))
    return path


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_perf_analyzer_sweeps_concurrency(server, tmp_path, protocol):
    url = server.http_url if protocol == "http" else server.grpc_url
    out = tmp_path / f"{protocol}.csv"
    cmd = [perf_analyzer(), "-m", "bert", "-u", url, "-i", protocol,
           "--input-data", str(input_data(tmp_path / "data.json")),
           "--concurrency-range", "1:2", "--measurement-mode", "count_windows",
           "--measurement-request-count", "30", "--max-trials", "4",
           "--stability-percentage", "999", "-f", str(out), "--verbose-csv"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Throughput" in r.stdout, r.stdout
    rows = list(csv.DictReader(out.open()))
    # One row per level swept. perf_analyzer does not write them in sweep order: on a loaded
    # 2-core machine, where two concurrent requests ran slower than one, it listed 2 before 1.
    assert sorted(int(row["Concurrency"]) for row in rows) == [1, 2], rows
    for row in rows:
        assert float(row["Inferences/Second"]) > 0, row
        # Server-side figures come from surge's statistics extension.
        assert int(row["Server Queue"]) >= 0 and int(row["Server Compute Infer"]) > 0, row


def test_perf_analyzer_reports_an_unknown_model(server, tmp_path):
    cmd = [perf_analyzer(), "-m", "no_such_model", "-u", server.http_url, "-i", "http",
           "--concurrency-range", "1", "--measurement-request-count", "5",
           "--measurement-mode", "count_windows"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert r.returncode != 0
    assert "no_such_model" in (r.stdout + r.stderr)
