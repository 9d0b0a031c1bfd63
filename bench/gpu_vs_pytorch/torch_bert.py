"""PyTorch peer for surge_cuda_bench, on the same card in the same run: the same Hugging Face
folder (tools/bench/make_bert_base_hf.py: BERT-base BertForSequenceClassification, random
weights, FP16) and the same tokens (its cases.json), with SDPA attention, run

  eager, eager replayed as a CUDA graph, and torch.compile (modes given by --compile; each on the
  shapes given by --compile-shapes, within --compile-budget-s of compile time),

timed as the Surge side is: median wall time per forward including input upload and logits
download. Also measured here: the cuBLAS FP16 GEMM ceiling (8192^3 through torch.matmul) and
the four BERT-base GEMM shapes at 16384 rows (the GEMM-only floor of 128x128), and, given
--surge-json, how far Surge's logits are from PyTorch's (eager) on every case.

    python3 torch_bert.py --model DIR [--json FILE] [--surge-json FILE] [--reps N]
"""
import argparse
import copy
import json
import os
import time

import torch
from transformers import BertForSequenceClassification


def timed(step, reps, warmup=5):
    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    ms = []
    for _ in range(reps):
        t = time.perf_counter()
        step()
        ms.append((time.perf_counter() - t) * 1e3)
    ms.sort()
    return {"median_ms": ms[len(ms) // 2], "p10_ms": ms[len(ms) // 10],
            "p90_ms": ms[len(ms) * 9 // 10], "reps": reps}


def gemm_ms(m, n, k, reps=20):
    a = torch.randn(m, k, device="cuda", dtype=torch.float16)
    b = torch.randn(k, n, device="cuda", dtype=torch.float16)
    for _ in range(3):
        a @ b
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(reps):
        start.record()
        a @ b
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    times.sort()
    return times[len(times) // 2]


def ceilings():
    n = 8192
    ms = gemm_ms(n, n, n)
    out = {"gemm_8192_fp16_ms": ms, "gemm_8192_fp16_tflops": 2 * n ** 3 / ms * 1e-9}
    # BERT-base's four GEMMs at 16384 token rows (x 12 layers: the GEMM-only time of 128x128).
    shapes = {"qkv": (16384, 2304, 768), "proj": (16384, 768, 768), "ffn1": (16384, 3072, 768),
              "ffn2": (16384, 768, 3072)}
    per_layer = 0.0
    for name, (m, nn, k) in shapes.items():
        t = gemm_ms(m, nn, k)
        out[f"bert_{name}_16384_ms"] = t
        per_layer += t
    out["bert_gemms_128x128_ms"] = 12 * per_layer
    out["bert_gemms_128x128_tflops"] = 12 * sum(2 * m * nn * k for m, nn, k in shapes.values()) \
        / (12 * per_layer) * 1e-9
    return out


def rel_err(got, ref):
    got, ref = torch.tensor(got, dtype=torch.float64), ref.double().flatten()
    return {"rel_l2": float((got - ref).norm() / ref.norm()),
            "max_abs": float((got - ref).abs().max()),
            "ref_max_abs": float(ref.abs().max())}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--json")
    ap.add_argument("--surge-json")
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--compile", default="reduce-overhead,max-autotune-no-cudagraphs")
    ap.add_argument("--compile-shapes", default="1x128,128x128,64posts")
    ap.add_argument("--max-autotune-shapes", default="128x128")
    ap.add_argument("--compile-budget-s", type=float, default=240)
    args = ap.parse_args()
    try:
        model = BertForSequenceClassification.from_pretrained(
            args.model, dtype=torch.float16, attn_implementation="sdpa")
    except TypeError:
        model = BertForSequenceClassification.from_pretrained(
            args.model, torch_dtype=torch.float16, attn_implementation="sdpa")
    model = model.cuda().eval()
    model32 = copy.deepcopy(model).float()  # the reference both FP16 sides are measured against
    cases = json.load(open(os.path.join(args.model, "cases.json")))["cases"]
    surge = {}
    if args.surge_json and os.path.exists(args.surge_json):
        for r in json.load(open(args.surge_json))["results"]:
            surge[(r["shape"], r["variant"])] = r["logits"]

    results, agreement = [], []
    modes = [m for m in args.compile.split(",") if m]
    compiled = {m: torch.compile(model, mode=m, dynamic=False) for m in modes}
    state = {"compile_left": args.compile_budget_s}

    def compile_case(name, ids, mask, d_ids, d_mask, record, only):
        for mode, cm in compiled.items():
            if mode != only:
                continue
            shapes = args.max_autotune_shapes if mode.startswith("max-autotune") \
                else args.compile_shapes
            if name not in shapes.split(","):
                continue
            if state["compile_left"] <= 0:
                results.append({"shape": name, "mode": f"compile:{mode}",
                                "skipped": "compile budget spent"})
                continue

            def comp(cm=cm):
                torch.compiler.cudagraph_mark_step_begin()
                d_ids.copy_(ids)
                d_mask.copy_(mask)
                return cm(input_ids=d_ids, attention_mask=d_mask).logits.float().cpu()

            t = time.perf_counter()
            try:
                for _ in range(3):
                    comp()
            except Exception as e:  # a failed compile is reported, not fatal
                results.append({"shape": name, "mode": f"compile:{mode}",
                                "error": f"{type(e).__name__}: {e}"[:400]})
                continue
            torch.cuda.synchronize()
            spent = time.perf_counter() - t
            state["compile_left"] -= spent
            print(f"torch.compile {mode} {name}: first calls {spent:.1f} s", flush=True)
            record(f"compile:{mode}", comp)

    # Two passes: eager and hand-captured CUDA graphs for every case first, then torch.compile
    # (whose CUDA-graph trees are kept apart from the hand-captured graphs).
    # Modes in the order given (each over its shapes), so a slow autotuning mode given last cannot
    # starve the others of the compile budget.
    work = [("plain", None, c) for c in cases]
    for m in modes:
        shapes = (args.max_autotune_shapes if m.startswith("max-autotune")
                  else args.compile_shapes).split(",")
        work += [("compile", m, c) for c in cases if c["name"] in shapes]
    for phase, only, case in work:
        name = case["name"]
        ids = torch.tensor(case["input_ids"], dtype=torch.int64).pin_memory()
        mask = torch.tensor(case["attention_mask"], dtype=torch.int64).pin_memory()
        d_ids, d_mask = ids.cuda(), mask.cuda()
        with torch.inference_mode():
            def eager():
                d_ids.copy_(ids)
                d_mask.copy_(mask)
                return model(input_ids=d_ids, attention_mask=d_mask).logits.float().cpu()

            def record(mode, step):
                r = timed(step, args.reps)
                r.update({"shape": name, "mode": mode})
                results.append(r)
                print(f"torch {mode:34s} {name:8s} median {r['median_ms']:8.3f} ms", flush=True)

            if phase == "compile":
                compile_case(name, ids, mask, d_ids, d_mask, record, only)
                continue
            ref = eager()
            ref32 = model32(input_ids=d_ids, attention_mask=d_mask).logits.float().cpu()
            agreement.append({"shape": name, "who": "torch fp16",
                              "vs_fp32": rel_err(ref.flatten().tolist(), ref32)})
            for (shape, variant), lg in surge.items():
                if shape == name:
                    agreement.append({"shape": name, "who": f"surge {variant}",
                                      "vs_fp32": rel_err(lg, ref32),
                                      "vs_torch_fp16": rel_err(lg, ref)})
            record("eager", eager)
            s_ = torch.cuda.Stream()
            s_.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s_):
                for _ in range(3):
                    model(input_ids=d_ids, attention_mask=d_mask)
            torch.cuda.current_stream().wait_stream(s_)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                static_out = model(input_ids=d_ids, attention_mask=d_mask).logits

            def graph():
                d_ids.copy_(ids)
                d_mask.copy_(mask)
                g.replay()
                return static_out.float().cpu()

            record("cuda_graph", graph)
            del g, static_out
            torch.cuda.synchronize()
    ceil = ceilings()
    print(f"cuBLAS FP16 GEMM 8192^3: {ceil['gemm_8192_fp16_tflops']:.0f} TFLOP/s; BERT-base "
          f"GEMMs at 128x128: {ceil['bert_gemms_128x128_ms']:.2f} ms "
          f"({ceil['bert_gemms_128x128_tflops']:.0f} TFLOP/s)")
    for a in agreement:
        e = a["vs_fp32"]
        print(f"logits vs fp32 {a['shape']:8s} {a['who']:30s} rel {e['rel_l2']:.2e} "
              f"max abs {e['max_abs']:.2e} (|logit| max {e['ref_max_abs']:.2e})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"torch": torch.__version__, "device": torch.cuda.get_device_name(),
                       "results": results, "ceilings": ceil, "agreement": agreement}, f)


if __name__ == "__main__":
    main()
