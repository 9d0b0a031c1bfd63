#!/usr/bin/env python3
"""`surge serve` against the engine it serves, in one run on one machine (CPU, small model).

Measures the three serving targets of the server:
  1. overhead: batch-1 requests at saturating concurrency through the dynamic batcher (over gRPC
     and, with --protocols grpc,http, over HTTP with binary tensors), against
     `surge bench` on the same plan at the batch size the batcher actually formed
     (inference_count / execution_count from the statistics extension). Serve windows and bench
     runs alternate (--pairs of them) and the median ratio counts, so that a slow spell of a
     shared machine moves both sides of a pair rather than one side of the result;
  2. HTTP health endpoint rate with keep-alive (`surge perf --health`, and wrk when installed);
  3. p99 latency at 50 % of the peak rate (Poisson arrivals), against
     max_queue_delay + 2 x the compute time of one formed batch;
and, to tell the network's share from the rest, the overhead once more with `surge perf
--in-process`: the same requests sent straight to the scheduler of a repository loaded in the
load generator's own process.

    .venv/bin/python bench/serve/run.py [--seq 32] [--concurrency 32] [--threads 2] [--pairs 3]

Each window also records the CPU time that processes other than the server and the load
generator took ("other_cores"): above a few hundredths, the machine was not quiet.

Model: the 4-layer hidden-256 BERT skeleton filled with random weights by
tools/bench/make_bench_model.py. Writes bench/results/<date>-serve-<host>.json.
"""
import argparse
import datetime
import json
import os
import platform
import resource
import shutil
import signal
import statistics
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


HZ = os.sysconf("SC_CLK_TCK")


def machine_busy_s():
    f = [int(x) for x in open("/proc/stat").readline().split()[1:]]
    return (sum(f) - f[3] - f[4]) / HZ  # all but idle and iowait


def process_cpu_s(pid):
    f = open(f"/proc/{pid}/stat").read()
    f = f[f.rindex(")") + 2:].split()
    return (int(f[11]) + int(f[12])) / HZ


def children_cpu_s():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


class CpuWindow:
    """CPU seconds per second of wall time of the server, of this script's finished children
    (load generator, bench) and of everything else on the machine, over a `with` block."""

    def __init__(self, server_pid):
        self.pid = server_pid

    def __enter__(self):
        self.t0, self.b0 = time.time(), machine_busy_s()
        self.s0, self.c0 = process_cpu_s(self.pid), children_cpu_s()
        return self

    def __exit__(self, *exc):
        dt = time.time() - self.t0
        server = process_cpu_s(self.pid) - self.s0
        children = children_cpu_s() - self.c0
        busy = machine_busy_s() - self.b0
        self.result = {"server_cores": server / dt, "client_cores": children / dt,
                       "other_cores": max(0.0, busy - server - children) / dt}


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
    ap.add_argument("--pairs", type=int, default=3, help="serve/bench pairs; the median counts")
    ap.add_argument("--protocols", default="grpc,http",
                    help="overhead over gRPC (always) and, when listed, over HTTP (binary tensors)")
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
              "threads": a.threads, "max_queue_delay_us": a.delay_us,
              "loadavg_before": open("/proc/loadavg").read().split()[:3]}
    try:
        # 1. Saturating batch-1 load over each protocol, then `surge bench` at the batch size the
        # batcher formed; --pairs times, alternating.
        def overhead(protocol, url):
            pairs = []
            for _ in range(a.pairs):
                i0, e0 = stats(http)
                with CpuWindow(proc.pid) as serve_cpu:
                    sat = perf(a.surge, url, protocol, a.seq,
                               ["--concurrency-range", str(a.concurrency), "-p",
                                str(a.interval_ms), "--warmup-ms", "1000"])[0]
                i1, e1 = stats(http)
                formed = (i1 - i0) / max(1, e1 - e0)
                batch = max(1, round(formed))
                with CpuWindow(proc.pid) as bench_cpu:
                    bench = json.loads(run([a.surge, "bench", plan, "--batch", str(batch),
                                            "--seq", str(a.seq), "--threads", str(a.threads),
                                            "--iterations", "100", "--json"]))
                bench_ms = float(bench["latency_ms"]["p50"])
                # `surge bench`'s own throughput (runs over wall time, like the served rate) is
                # what the target compares with; batch / p50 latency, which leaves the slow runs
                # out, is recorded beside it.
                bench_tput = float(bench["throughput"]["sequences_per_s"])
                bench_p50_tput = batch * 1000.0 / bench_ms
                pairs.append({"serve_infer_per_s": sat["throughput"],
                              "serve_p99_us": sat["p99_us"], "formed_batch": formed,
                              "bench_batch": batch, "bench_p50_ms": bench_ms,
                              "bench_mean_ms": float(bench["latency_ms"]["mean"]),
                              "bench_infer_per_s": bench_tput,
                              "bench_p50_infer_per_s": bench_p50_tput,
                              "ratio": sat["throughput"] / bench_tput,
                              "ratio_to_p50": sat["throughput"] / bench_p50_tput,
                              "serve_window_cpu": serve_cpu.result,
                              "bench_window_cpu": bench_cpu.result})
            median = sorted(pairs, key=lambda p: p["ratio"])[len(pairs) // 2]
            return {"protocol": protocol, "concurrency": a.concurrency, "pairs": pairs,
                    "ratio": statistics.median(p["ratio"] for p in pairs),
                    "ratio_to_p50": statistics.median(p["ratio_to_p50"] for p in pairs),
                    "serve_infer_per_s": median["serve_infer_per_s"],
                    "formed_batch": median["formed_batch"],
                    "bench_batch": median["bench_batch"],
                    "bench_infer_per_s": median["bench_infer_per_s"],
                    "bench_p50_ms": statistics.median(p["bench_p50_ms"] for p in pairs)}

        result["overhead"] = overhead("grpc", grpc)
        if "http" in a.protocols:
            result["overhead_http"] = overhead("http", http)
        bench_ms = result["overhead"]["bench_p50_ms"]
        sat = {"throughput": result["overhead"]["serve_infer_per_s"]}

        # 2. Health endpoint with keep-alive.
        with CpuWindow(proc.pid) as health_cpu:
            health = perf(a.surge, http, "http", a.seq, ["--health", "--concurrency-range", "64",
                                                         "--client-threads", "2",
                                                         "-p", str(a.interval_ms)])[0]
        result["health"] = {"surge_perf_req_per_s": health["throughput"], "cpu": health_cpu.result}
        if shutil.which("wrk"):
            out = run(["wrk", "-t2", "-c64", "-d5s", f"http://{http}/v2/health/live"])
            for l in out.splitlines():
                if l.startswith("Requests/sec:"):
                    result["health"]["wrk_req_per_s"] = float(l.split()[1])

        # 3. p99 at half the peak rate, Poisson arrivals.
        rate = max(1, int(sat["throughput"] / 2))
        with CpuWindow(proc.pid) as half_cpu:
            half = perf(a.surge, grpc, "grpc", a.seq,
                        ["--request-rate-range", str(rate), "--request-distribution", "poisson",
                         "-p", str(2 * a.interval_ms), "--warmup-ms", "1000"])[0]
        bound_us = a.delay_us + 2 * bench_ms * 1000
        result["p99_at_half_load"] = {"rate": rate, "achieved": half["throughput"],
                                      "p50_us": half["p50_us"], "p99_us": half["p99_us"],
                                      "bound_us": bound_us, "within": half["p99_us"] <= bound_us,
                                      "cpu": half_cpu.result}
        # 4. The same load without the network (the server above is idle by now).
        inproc = []
        for _ in range(a.pairs):
            step = json.loads(run([a.surge, "perf", "-m", "small", "--in-process", repo,
                                   "--model-cache-dir", os.path.join(work, "cache"), "--json",
                                   "--concurrency-range", str(a.concurrency), "-p",
                                   str(a.interval_ms), "--warmup-ms", "1000",
                                   *[f"--shape={n}:{a.seq}" for n in
                                     ("input_ids", "attention_mask", "token_type_ids")]],
                                  timeout=900).strip().splitlines()[-1])["results"][0]
            batch = max(1, round(step["formed_batch"]))
            bench = json.loads(run([a.surge, "bench", plan, "--batch", str(batch), "--seq",
                                    str(a.seq), "--threads", str(a.threads), "--iterations",
                                    "100", "--json"]))
            bench_tput = float(bench["throughput"]["sequences_per_s"])
            inproc.append({"infer_per_s": step["throughput"], "formed_batch": step["formed_batch"],
                           "bench_batch": batch, "bench_infer_per_s": bench_tput,
                           "ratio": step["throughput"] / bench_tput})
        result["in_process"] = {"pairs": inproc,
                                "ratio": statistics.median(p["ratio"] for p in inproc)}
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
        shutil.rmtree(repo, ignore_errors=True)

    for key in ("overhead", "overhead_http"):
        if key not in result:
            continue
        o = result[key]
        for p in o["pairs"]:
            print(f"  {o['protocol']} pair: serve {p['serve_infer_per_s']:.0f} infer/s (formed "
                  f"batch {p['formed_batch']:.1f}), bench batch {p['bench_batch']} "
                  f"{p['bench_infer_per_s']:.0f} infer/s -> {100 * p['ratio']:.1f} % "
                  f"({100 * p['ratio_to_p50']:.1f} % of batch / p50); other cores "
                  f"{p['serve_window_cpu']['other_cores']:.2f} / "
                  f"{p['bench_window_cpu']['other_cores']:.2f}")
        print(f"overhead over {o['protocol']}: median of {len(o['pairs'])} pairs "
              f"{100 * o['ratio']:.1f} % of surge bench's throughput ({100 * o['ratio_to_p50']:.1f} "
              f"% of batch / p50 latency) at concurrency {a.concurrency}  (target >= 90 %)")
    h = result["health"]
    print(f"health: surge perf {h['surge_perf_req_per_s']:.0f} req/s"
          + (f", wrk {h['wrk_req_per_s']:.0f} req/s" if "wrk_req_per_s" in h else "")
          + "  (target >= 50000)")
    p = result["p99_at_half_load"]
    print(f"p99 at {p['rate']} req/s (half of peak): {p['p99_us'] / 1000:.2f} ms vs bound "
          f"{p['bound_us'] / 1000:.2f} ms (max_queue_delay + 2 x batch compute) -> "
          f"{'within' if p['within'] else 'OVER'}")
    result["loadavg_after"] = open("/proc/loadavg").read().split()[:3]
    ip = result["in_process"]
    print(f"in process (no network): median {100 * ip['ratio']:.1f} % of surge bench's throughput "
          f"(" + ", ".join(f"{p['infer_per_s']:.0f} infer/s at batch {p['formed_batch']:.1f}"
                           for p in ip["pairs"]) + ")")
    out = a.out or os.path.join(ROOT, "bench/results",
                                f"{result['date']}-serve-{platform.node() or 'cpu'}.json")
    with open(out, "w") as f:
        json.dump(result, f, indent=1)
    print("wrote", out)


if __name__ == "__main__":
    main()
