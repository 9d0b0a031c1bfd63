#!/usr/bin/env python3
"""`surge serve` against the engine it serves, in one run on one machine (CPU, small model).

Measures the three serving targets of the server:
  1. overhead: batch-1 requests at saturating concurrency through the dynamic batcher, against
     `surge bench` on the same plan at the batch size the batcher actually formed
     (inference_count / execution_count from the statistics extension);
  2. HTTP health endpoint rate with keep-alive (`surge perf --health`, and wrk when installed);
  3. p99 latency at 50 % of the peak rate (Poisson arrivals), against
     max_queue_delay + 2 x the compute time of one formed batch.

    .venv/bin/python bench/serve/run.py [--seq 32] [--concurrency 32] [--threads 2]

Model: the 4-layer hidden-256 BERT skeleton filled with random weights by
tools/bench/make_bench_model.py. Writes bench/results/<date>-serve-<host>.json.
"""
import argparse
import datetime
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SKELETON = os.path.join(ROOT, "tests/fixtures/models/skeletons/bert_4l_256.torchscript.onnx")

CONFIG = """
name: "small"
max_batch_size: {max_batch}
input [
  {{ name: "input_ids" data_type: TYPE_INT64 dims: [ -1 ] }},
  {{ name: "attention_mask" data_type: TYPE_INT64 dims: [ -1 ] }},
  {{ name: "token_type_ids" data_type: TYPE_INT64 dims: [ -1 ] }}
]
dynamic_batching {{ max_queue_delay_microseconds: {delay_us} }}
instance_group [ {{ count: 1 kind: KIND_CPU }} ]
parameters {{ key: "num_threads" value: {{ string_value: "{threads}" }} }}
parameters {{ key: "profile" value: {{ string_value: "{profile}" }} }}
"""


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw).stdout


def perf(surge, url, protocol, seq, extra):
    cmd = [surge, "perf", "-m", "small", "-u", url, "-i", protocol, "--json",
           "--shape", f"input_ids:{seq}", "--shape", f"attention_mask:{seq}",
           "--shape", f"token_type_ids:{seq}", *extra]
    out = run(cmd, timeout=900)
    return json.loads(out.strip().splitlines()[-1])["results"]


def stats(http):
    with urllib.request.urlopen(f"http://{http}/v2/models/small/stats", timeout=10) as r:
        s = json.load(r)["model_stats"][0]
    return int(s["inference_count"]), int(s["execution_count"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seq", type=int, default=32)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--max-batch", type=int, default=32)
    ap.add_argument("--delay-us", type=int, default=2000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--interval-ms", type=int, default=5000)
    ap.add_argument("--surge", default=os.path.join(ROOT, "build/release/bin/surge"))
    ap.add_argument("--out", default=None)
    a = ap.parse_args()

    work = os.path.join(ROOT, "bench/work/serve")
    os.makedirs(work, exist_ok=True)
    model_dir = os.path.join(work, "bert_4l_256")
    if not os.path.exists(os.path.join(model_dir, "model.onnx")):
        run([sys.executable, os.path.join(ROOT, "tools/bench/make_bench_model.py"), SKELETON,
             model_dir])
    profile = (f"input_ids:1x1,{a.max_batch}x{a.seq},{a.max_batch}x{max(a.seq, 128)};"
               f"attention_mask:1x1,{a.max_batch}x{a.seq},{a.max_batch}x{max(a.seq, 128)};"
               f"token_type_ids:1x1,{a.max_batch}x{a.seq},{a.max_batch}x{max(a.seq, 128)}")
    repo = tempfile.mkdtemp(prefix="surge_serve_bench_")
    os.makedirs(os.path.join(repo, "small", "1"))
    shutil.copy(os.path.join(model_dir, "model.onnx"), os.path.join(repo, "small", "1"))
    shutil.copy(os.path.join(model_dir, "weights.bin"), os.path.join(repo, "small", "1"))
    with open(os.path.join(repo, "small", "config.pbtxt"), "w") as f:
        f.write(CONFIG.format(max_batch=a.max_batch, delay_us=a.delay_us, threads=a.threads,
                              profile=profile))
    plan = os.path.join(work, "small.plan")
    run([a.surge, "build", os.path.join(model_dir, "model.onnx"), "-o", plan, "--profile",
         profile])

    log = open(os.path.join(work, "server.log"), "w")
    proc = subprocess.Popen([a.surge, "serve", "--model-repository", repo, "--http-port", "0",
                             "--grpc-port", "0", "--metrics-port", "0", "--http-address",
                             "127.0.0.1", "--grpc-address", "127.0.0.1", "--metrics-address",
                             "127.0.0.1", "--model-cache-dir", os.path.join(work, "cache"),
                             "--log-level", "warn"], stdout=subprocess.PIPE, stderr=log, text=True)
    line = proc.stdout.readline()
    if not line.startswith("surge serve: ready"):
        proc.kill()
        sys.exit("surge serve did not start; see " + log.name)
    ports = dict(kv.split("=") for kv in line.split()[3:])
    http, grpc = f"127.0.0.1:{ports['http']}", f"127.0.0.1:{ports['grpc']}"
    result = {"date": datetime.date.today().isoformat(), "host": platform.node(),
              "cpus": os.cpu_count(), "model": "bert_4l_256 (random weights)", "seq": a.seq,
              "threads": a.threads, "max_queue_delay_us": a.delay_us}
    try:
        # 1. Saturating batch-1 load over gRPC, then the batch size the batcher formed.
        i0, e0 = stats(http)
        sat = perf(a.surge, grpc, "grpc", a.seq,
                   ["--concurrency-range", str(a.concurrency), "-p", str(a.interval_ms),
                    "--warmup-ms", "1000"])[0]
        i1, e1 = stats(http)
        formed = (i1 - i0) / max(1, e1 - e0)
        batch = max(1, round(formed))
        bench = json.loads(run([a.surge, "bench", plan, "--batch", str(batch), "--seq", str(a.seq),
                                "--threads", str(a.threads), "--iterations", "50", "--json"]))
        lat = bench.get("latency_ms", bench)
        bench_ms = float(lat.get("p50", lat.get("median", 0)))
        bench_tput = batch * 1000.0 / bench_ms
        result["overhead"] = {"concurrency": a.concurrency, "serve_infer_per_s": sat["throughput"],
                              "serve_p99_us": sat["p99_us"], "formed_batch": formed,
                              "bench_batch": batch, "bench_p50_ms": bench_ms,
                              "bench_infer_per_s": bench_tput,
                              "ratio": sat["throughput"] / bench_tput}

        # 2. Health endpoint with keep-alive.
        health = perf(a.surge, http, "http", a.seq, ["--health", "--concurrency-range", "64",
                                                     "-p", str(a.interval_ms)])[0]
        result["health"] = {"surge_perf_req_per_s": health["throughput"]}
        if shutil.which("wrk"):
            out = run(["wrk", "-t2", "-c64", "-d5s", f"http://{http}/v2/health/live"])
            for l in out.splitlines():
                if l.startswith("Requests/sec:"):
                    result["health"]["wrk_req_per_s"] = float(l.split()[1])

        # 3. p99 at half the peak rate, Poisson arrivals.
        rate = max(1, int(sat["throughput"] / 2))
        half = perf(a.surge, grpc, "grpc", a.seq,
                    ["--request-rate-range", str(rate), "--request-distribution", "poisson",
                     "-p", str(2 * a.interval_ms), "--warmup-ms", "1000"])[0]
        bound_us = a.delay_us + 2 * bench_ms * 1000
        result["p99_at_half_load"] = {"rate": rate, "achieved": half["throughput"],
                                      "p50_us": half["p50_us"], "p99_us": half["p99_us"],
                                      "bound_us": bound_us, "within": half["p99_us"] <= bound_us}
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
        shutil.rmtree(repo, ignore_errors=True)

    o = result["overhead"]
    print(f"overhead: serve {o['serve_infer_per_s']:.0f} infer/s at concurrency {a.concurrency} "
          f"(formed batch {o['formed_batch']:.1f}) vs surge bench batch {o['bench_batch']}: "
          f"{o['bench_infer_per_s']:.0f} infer/s -> {100 * o['ratio']:.1f} %  (target >= 90 %)")
    h = result["health"]
    print(f"health: surge perf {h['surge_perf_req_per_s']:.0f} req/s"
          + (f", wrk {h['wrk_req_per_s']:.0f} req/s" if "wrk_req_per_s" in h else "")
          + "  (target >= 50000)")
    p = result["p99_at_half_load"]
    print(f"p99 at {p['rate']} req/s (half of peak): {p['p99_us'] / 1000:.2f} ms vs bound "
          f"{p['bound_us'] / 1000:.2f} ms (max_queue_delay + 2 x batch compute) -> "
          f"{'within' if p['within'] else 'OVER'}")
    out = a.out or os.path.join(ROOT, "bench/results",
                                f"{result['date']}-serve-{platform.node() or 'cpu'}.json")
    with open(out, "w") as f:
        json.dump(result, f, indent=1)
    print("wrote", out)


if __name__ == "__main__":
    main()
