#!/usr/bin/env python3
"""Surge CPU engine vs ONNX Runtime (CPU EP) on the same ONNX file, same thread count, one run.

Models: BERT-base and a 4-layer hidden-256 BERT, both PyTorch exports (TorchScript path) filled
with random weights by tools/bench/make_bench_model.py; `demo` is the bundled trained demo model
(models/demo: its own vocabulary; accuracy on its category logits over simulated posts of a
scenario it was not trained on). Shapes 1x32, 1x128, 8x128, 32x128.
For each: Surge builds a plan (timed), `surge bench --json` measures it, ONNX Runtime (graph
optimisation level all, intra-op threads = --threads) is timed in this process with the same
warm-up and iteration counts. Prints the ratio table; writes
bench/results/<date>-cpu[_int8]_vs_ort[-<models, when not the default>]-<cores>core.json.

With int8 in --precisions (the default), the same run also calibrates each model on posts from
the fixture corpus (`surge calibrate`, fixture vocabulary), builds an INT8 plan through the
accuracy guard (`surge build --precision int8 --calibration`), times it beside FP32 and ONNX
Runtime at every shape, and measures accuracy on other posts: Surge INT8 and Surge FP32 logits
against ONNX Runtime FP32 logits on the same token ids (top-1 agreement, cosine), with the FP32
logit margins (top-1 minus top-2) that say how easily a random-weight model's prediction flips.

    .venv/bin/python bench/cpu_vs_ort/run.py [--threads 2] [--models bert_base,bert_4l_256]
        [--shapes 32x128] [--precisions fp32,int8]
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


def iterations_for(model, batch, seq, minimum=5):
    work = batch * seq * (12 if model == "bert_base" else 1)
    return max(minimum, min(200, int(20000 / work)))


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


CORPUS = os.path.join(ROOT, "tests/fixtures/text/weibo_corpus.txt")
VOCAB = os.path.join(ROOT, "tests/fixtures/text/vocab.txt")


def model_spec(a, model, folder):
    """Where a model's ONNX file, vocabulary and posts come from, and which output is compared."""
    if model != "demo":
        return {"onnx": os.path.join(folder, "model.onnx"), "vocab": VOCAB, "vocab_size": 21128,
                "logits": "logits", "corpus": CORPUS}
    demo = os.path.join(ROOT, "models/demo")
    os.makedirs(folder, exist_ok=True)
    corpus = os.path.join(folder, "posts.txt")
    if not os.path.exists(corpus):
        # Simulated posts of a scenario the model was not trained on.
        jsonl = os.path.join(folder, "posts.jsonl")
        subprocess.run([a.surge, "simulate", "--scenario",
                        os.path.join(ROOT, "tests/fixtures/stream/scenario_b.yaml"), "--duration",
                        "3m", "--out", jsonl, "--truth", os.path.join(folder, "truth.json")],
                       check=True, capture_output=True)
        with open(jsonl, encoding="utf-8") as f, open(corpus, "w", encoding="utf-8") as o:
            for line in f:
                o.write(json.loads(line)["text"].replace("\n", " ") + "\n")
    with open(os.path.join(demo, "vocab.txt"), encoding="utf-8") as f:
        size = sum(1 for _ in f)
    return {"onnx": os.path.join(demo, "model.onnx"), "vocab": os.path.join(demo, "vocab.txt"),
            "vocab_size": size, "logits": "category_logits", "corpus": corpus}


def corpus_slice(path, start, count, corpus=CORPUS):
    out = []
    with open(corpus, encoding="utf-8", errors="replace") as f:
        for i, line in enumerate(f):
            if i >= start and line.strip():
                out.append(line.rstrip("\n"))
            if len(out) >= count:
                break
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(out) + "\n")
    return out


def tokenised_batches(surge, texts_path, max_length, batch, vocab=VOCAB):
    """Token ids of every line through `surge tokenize` (the tokenizer the plans were calibrated
    with), padded per batch."""
    with open(texts_path, encoding="utf-8") as f:
        out = subprocess.run([surge, "tokenize", "--vocab", vocab, "--json", "--max-length",
                              str(max_length)], stdin=f, check=True, capture_output=True,
                             text=True).stdout
    rows = [json.loads(line)["ids"] for line in out.splitlines() if line.strip()]
    batches = []
    for b in range(0, len(rows), batch):
        part = rows[b:b + batch]
        seq = max(len(r) for r in part)
        ids = np.zeros((len(part), seq), np.int64)
        mask = np.zeros((len(part), seq), np.int64)
        for i, r in enumerate(part):
            ids[i, :len(r)] = r
            mask[i, :len(r)] = 1
        batches.append({"input_ids": ids, "attention_mask": mask,
                        "token_type_ids": np.zeros_like(ids)})
    return batches


def surge_logits(surge, plan, batches, threads, work, logits="logits"):
    out = []
    for i, b in enumerate(batches):
        path = os.path.join(work, f"batch{i}.json")
        with open(path, "w") as f:
            json.dump({k: {"shape": list(v.shape), "data": v.ravel().tolist()} for k, v in b.items()},
                      f)
        res = json.loads(subprocess.run([surge, "infer", plan, "--input", path, "--threads",
                                         str(threads)], check=True, capture_output=True,
                                        text=True).stdout)
        out.append(np.array(res[logits]["data"], np.float32).reshape(res[logits]["shape"]))
    return np.concatenate(out)


def agreement(ref, got):
    cos = np.sum(ref * got, 1) / (np.linalg.norm(ref, axis=1) * np.linalg.norm(got, axis=1))
    return {"rows": int(ref.shape[0]),
            "top1_agreement": float(np.mean(ref.argmax(1) == got.argmax(1))),
            "cosine_mean": float(np.mean(cos)), "cosine_min": float(np.min(cos))}


def accuracy(a, model, spec, plans, work):
    """Surge plans vs ONNX Runtime FP32 logits on unseen posts."""
    import onnxruntime as ort
    onnx_path = spec["onnx"]
    texts = os.path.join(work, "eval_posts.txt")
    corpus_slice(texts, 3000, a.eval_texts, spec["corpus"])
    batches = tokenised_batches(a.surge, texts, 128, 16, spec["vocab"])
    so = ort.SessionOptions()
    so.intra_op_num_threads = a.threads
    sess = ort.InferenceSession(onnx_path, so, providers=["CPUExecutionProvider"])
    names = {i.name for i in sess.get_inputs()}
    ref = np.concatenate([sess.run([spec["logits"]],
                                   {k: v for k, v in b.items() if k in names})[0]
                          for b in batches])
    top2 = np.sort(ref, 1)[:, -2:]
    margin = top2[:, 1] - top2[:, 0]
    result = {"model": model, "eval_posts": int(ref.shape[0]),
              "ort_fp32_logit_std": float(np.std(ref)),
              "ort_fp32_margin_median": float(np.median(margin)),
              "ort_fp32_margin_p10": float(np.percentile(margin, 10))}
    for name, plan in plans.items():
        result[f"surge_{name}_vs_ort_fp32"] = agreement(
            ref, surge_logits(a.surge, plan, batches, a.threads, work, spec["logits"]))
    return result


def build_int8(a, model, spec, folder, profile):
    onnx_path = spec["onnx"]
    posts = os.path.join(folder, "calib_posts.txt")
    corpus_slice(posts, 0, a.calib_texts, spec["corpus"])
    cache = os.path.join(folder, "model.calib")
    t = time.perf_counter()
    subprocess.run([a.surge, "calibrate", onnx_path, "--texts", posts, "--vocab", spec["vocab"],
                    "--max-length", "128", "-o", cache, "--threads", str(a.threads)], check=True,
                   capture_output=True)
    calib_s = time.perf_counter() - t
    plan = os.path.join(folder, "model.cpu.int8.plan")
    t = time.perf_counter()
    out = subprocess.run([a.surge, "build", onnx_path, "-o", plan, "--threads", str(a.threads),
                          "--profile", profile, "--precision", "int8", "--calibration", cache,
                          "--json"], check=True, capture_output=True, text=True).stdout
    build_s = time.perf_counter() - t
    q = json.loads(out)["quant"]
    print(f"{model:12s} int8: calibrate {calib_s:.1f} s, build (with guard) {build_s:.1f} s, "
          f"{q['quantised']}/{q['layers']} layers int8", flush=True)
    return plan, {"calibrate_s": calib_s, "build_s": build_s, "quant": q}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--models", default="bert_base,bert_4l_256",
                    help="bert_base, bert_4l_256 (random weights), demo (models/demo)")
    ap.add_argument("--shapes", default=",".join(f"{b}x{s}" for b, s in SHAPES))
    ap.add_argument("--precisions", default="fp32,int8")
    ap.add_argument("--min-iterations", type=int, default=5)
    ap.add_argument("--calib-texts", type=int, default=400)
    ap.add_argument("--eval-texts", type=int, default=400)
    ap.add_argument("--surge", default=os.path.join(ROOT, "build/release/bin/surge"))
    ap.add_argument("--work", default=os.path.join(ROOT, "bench/work"))
    a = ap.parse_args()
    shapes = [tuple(int(x) for x in s.split("x")) for s in a.shapes.split(",")]
    int8 = "int8" in a.precisions.split(",")
    rows = []
    accuracy_rows = []
    int8_builds = {}
    for model in a.models.split(","):
        folder = os.path.join(a.work, model)
        spec = model_spec(a, model, folder)
        onnx_path = spec["onnx"]
        if not os.path.exists(onnx_path):
            skeleton = os.path.join(ROOT, "tests/fixtures/models/skeletons",
                                    f"{model}.torchscript.onnx")
            subprocess.run([sys.executable, os.path.join(ROOT, "tools/bench/make_bench_model.py"),
                            skeleton, folder], check=True)
        plan = os.path.join(folder, "model.cpu.plan")
        profile = ("input_ids:1x1,8x128,32x128;attention_mask:1x1,8x128,32x128;"
                   "token_type_ids:1x1,8x128,32x128")
        t = time.perf_counter()
        subprocess.run([a.surge, "build", onnx_path, "-o", plan, "--threads", str(a.threads),
                        "--profile", profile], check=True, capture_output=True)
        build_s = time.perf_counter() - t
        int8_plan = None
        if int8:
            int8_plan, int8_builds[model] = build_int8(a, model, spec, folder, profile)
        for batch, seq in shapes:
            iters = iterations_for(model, batch, seq, a.min_iterations)
            warmup = max(2, iters // 10)
            s50, s99 = surge_bench(a.surge, plan, batch, seq, a.threads, warmup, iters)
            o50, o99 = ort_time(onnx_path, batch, seq, a.threads, warmup, iters, spec["vocab_size"])
            row = {"model": model, "batch": batch, "seq": seq, "iterations": iters,
                   "surge_p50_ms": s50, "surge_p99_ms": s99, "ort_p50_ms": o50,
                   "ort_p99_ms": o99, "speedup": o50 / s50, "surge_build_s": build_s}
            line = (f"{model:12s} {batch:3d}x{seq:<4d} surge {s50:9.2f} ms  ort {o50:9.2f} ms  "
                    f"ratio {o50 / s50:5.2f}x")
            if int8_plan:
                i50, i99 = surge_bench(a.surge, int8_plan, batch, seq, a.threads, warmup, iters)
                row.update({"surge_int8_p50_ms": i50, "surge_int8_p99_ms": i99,
                            "int8_speedup_vs_ort_fp32": o50 / i50,
                            "int8_speedup_vs_surge_fp32": s50 / i50})
                line += f"  int8 {i50:9.2f} ms  ort/int8 {o50 / i50:5.2f}x"
            rows.append(row)
            print(line, flush=True)
        if int8_plan:
            acc = accuracy(a, model, spec, {"fp32": plan, "int8": int8_plan}, folder)
            accuracy_rows.append(acc)
            i = acc["surge_int8_vs_ort_fp32"]
            print(f"{model:12s} int8 vs ORT fp32 on {acc['eval_posts']} posts: top-1 "
                  f"{100 * i['top1_agreement']:.2f}%, cosine mean {i['cosine_mean']:.6f} min "
                  f"{i['cosine_min']:.6f}; fp32 logit margin median "
                  f"{acc['ort_fp32_margin_median']:.4f} (logit std {acc['ort_fp32_logit_std']:.4f})",
                  flush=True)
    import onnxruntime
    result = {"date": datetime.date.today().isoformat(), "host": platform.node(),
              "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", "(default)"),
              "loadavg_at_end": open("/proc/loadavg").read().split()[:3],
              "cpu": platform.processor() or platform.machine(), "threads": a.threads,
              "onnxruntime": onnxruntime.__version__, "rows": rows,
              "int8_builds": int8_builds, "accuracy": accuracy_rows}
    os.makedirs(os.path.join(ROOT, "bench/results"), exist_ok=True)
    what = "cpu_int8_vs_ort" if int8 else "cpu_vs_ort"
    if a.models != ap.get_default("models"):
        what += "-" + a.models.replace(",", "-")
    out = os.path.join(ROOT, "bench/results",
                       f"{result['date']}-{what}-{os.cpu_count()}core.json")
    with open(out, "w") as f:
        json.dump(result, f, indent=1)
    print("\n| model | batch×seq | Surge p50 ms | ORT p50 ms | ORT/Surge |")
    print("| --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['model']} | {r['batch']}×{r['seq']} | {r['surge_p50_ms']:.2f} | "
              f"{r['ort_p50_ms']:.2f} | {r['speedup']:.2f}× |")
    if int8:
        print("\n| model | batch×seq | Surge INT8 p50 ms | ORT FP32 p50 ms | ORT/INT8 | "
              "Surge FP32/INT8 |")
        print("| --- | --- | --- | --- | --- | --- |")
        for r in rows:
            print(f"| {r['model']} | {r['batch']}×{r['seq']} | {r['surge_int8_p50_ms']:.2f} | "
                  f"{r['ort_p50_ms']:.2f} | {r['int8_speedup_vs_ort_fp32']:.2f}× | "
                  f"{r['int8_speedup_vs_surge_fp32']:.2f}× |")
    print(f"\nwrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
