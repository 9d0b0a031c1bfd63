#!/usr/bin/env python3
"""Surge CPU engine vs ONNX Runtime (CPU EP) on the same ONNX file, same thread count, one run.

Models: BERT-base and a 4-layer hidden-256 BERT, both PyTorch exports (TorchScript path) filled
with random weights by tools/bench/make_bench_model.py. Shapes 1x32, 1x128, 8x128, 32x128.
For each: Surge builds a plan (timed), `surge bench --json` measures it, ONNX Runtime (graph
optimisation level all, intra-op threads = --threads) is timed in this process with the same
warm-up and iteration counts. Prints the ratio table; writes bench/results/<date>-cpu_vs_ort-<host>.json.

    .venv/bin/python bench/cpu_vs_ort/run.py [--threads 2] [--models bert_base,bert_4l_256]
"""
import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHAPES = [(1, 32), (1, 128), (8, 128), (32, 128)]


def iterations_for(model, batch, seq):
    work = batch * seq * (12 if model == "bert_base" else 1)
    return max(5, min(200, int(20000 / work)))


def ort_time(path, batch, seq, threads, warmup, iters, vocab):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    feeds = {"input_ids": rng.integers(0, vocab, (batch, seq)).astype(np.int64),
             "attention_mask": np.ones((batch, seq), np.int64),
             "token_type_ids": np.zeros((batch, seq), np.int64)}
    names = {i.name for i in sess.get_inputs()}
    feeds = {k: v for k, v in feeds.items() if k in names}
    for _ in range(warmup):
        sess.run(None, feeds)
    times = []
    for _ in range(iters):
        t = time.perf_counter()
        sess.run(None, feeds)
        times.append((time.perf_counter() - t) * 1e3)
    return float(np.median(times)), float(np.percentile(times, 99))


def surge_bench(surge, plan, batch, seq, threads, warmup, iters):
    cmd = [surge, "bench", plan, "--batch", str(batch), "--seq", str(seq), "--warmup", str(warmup),
           "--iterations", str(iters), "--threads", str(threads), "--json"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    j = json.loads(out)
    lat = j.get("latency_ms", j)
    return float(lat["p50"]), float(lat["p99"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--models", default="bert_base,bert_4l_256")
    ap.add_argument("--surge", default=os.path.join(ROOT, "build/release/bin/surge"))
    ap.add_argument("--work", default=os.path.join(ROOT, "bench/work"))
    a = ap.parse_args()
    rows = []
    for model in a.models.split(","):
        folder = os.path.join(a.work, model)
        onnx_path = os.path.join(folder, "model.onnx")
        if not os.path.exists(onnx_path):
            skeleton = os.path.join(ROOT, "tests/fixtures/models/skeletons",
                                    f"{model}.torchscript.onnx")
            subprocess.run([sys.executable, os.path.join(ROOT, "tools/bench/make_bench_model.py"),
                            skeleton, folder], check=True)
        plan = os.path.join(folder, "model.cpu.plan")
        t = time.perf_counter()
        subprocess.run([a.surge, "build", onnx_path, "-o", plan, "--threads", str(a.threads),
                        "--profile", "input_ids:1x1,8x128,32x128;attention_mask:1x1,8x128,32x128;"
                        "token_type_ids:1x1,8x128,32x128"], check=True, capture_output=True)
        build_s = time.perf_counter() - t
        for batch, seq in SHAPES:
            iters = iterations_for(model, batch, seq)
            warmup = max(2, iters // 10)
            s50, s99 = surge_bench(a.surge, plan, batch, seq, a.threads, warmup, iters)
            o50, o99 = ort_time(onnx_path, batch, seq, a.threads, warmup, iters, 21128)
            rows.append({"model": model, "batch": batch, "seq": seq, "iterations": iters,
                         "surge_p50_ms": s50, "surge_p99_ms": s99, "ort_p50_ms": o50,
                         "ort_p99_ms": o99, "speedup": o50 / s50, "surge_build_s": build_s})
            print(f"{model:12s} {batch:3d}x{seq:<4d} surge {s50:9.2f} ms  ort {o50:9.2f} ms  "
                  f"ratio {o50 / s50:5.2f}x", flush=True)
    import onnxruntime
    result = {"date": datetime.date.today().isoformat(), "host": platform.node(),
              "cpu": platform.processor() or platform.machine(), "threads": a.threads,
              "onnxruntime": onnxruntime.__version__, "rows": rows}
    os.makedirs(os.path.join(ROOT, "bench/results"), exist_ok=True)
    out = os.path.join(ROOT, "bench/results",
                       f"{result['date']}-cpu_vs_ort-{os.cpu_count()}core.json")
    with open(out, "w") as f:
        json.dump(result, f, indent=1)
    print("\n| model | batch×seq | Surge p50 ms | ORT p50 ms | ORT/Surge |")
    print("| --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['model']} | {r['batch']}×{r['seq']} | {r['surge_p50_ms']:.2f} | "
              f"{r['ort_p50_ms']:.2f} | {r['speedup']:.2f}× |")
    print(f"\nwrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
