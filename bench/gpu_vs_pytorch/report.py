"""Merges one GPU round's surge_bench.json and torch_bench.json (scripts/gpu/check writes both)
into bench/results/<date>-gpu-bert-<machine><suffix>.json and prints the Markdown section for
docs/perf.md: times, ratios against PyTorch eager / CUDA graph / torch.compile (the faster mode
per shape, named), achieved TFLOP/s against the cuBLAS ceiling measured in the same run, the
issue's targets (met or not), and how far each side's logits are from an FP32 reference.

    python3 bench/gpu_vs_pytorch/report.py DIR [--machine h200] [--date YYYY-MM-DD]
        [--suffix -run3] [--commit SHA] [--append-perf docs/perf.md] [--torch-log FILE]

--torch-log FILE: where DIR has no torch_bench.json (a round's JSON that did not come back),
read the peer's medians, ceilings and logit agreement from the lines torch_bert.py printed to
its log (scripts/gpu/check's bench.log) instead; the torch version is not in the log, and the
merged JSON says where its torch figures came from.
"""
import argparse
import datetime
import json
import os
import re


def torch_from_log(path):
    """torch_bench.json's fields from torch_bert.py's printed lines."""
    results, agreement, ceil = [], [], {}
    num = r"([0-9.]+(?:e[-+]?[0-9]+)?)"
    for line in open(path, encoding="utf-8"):
        line = line.split(":", 1)[1] if line.startswith("/") and ".log:" in line else line
        m = re.match(r"torch (\S+)\s+(\S+)\s+median\s+" + num + " ms", line)
        if m:
            results.append({"mode": m[1], "shape": m[2], "median_ms": float(m[3])})
            continue
        m = re.match(r"cuBLAS FP16 GEMM 8192\^3: " + num + r" TFLOP/s; BERT-base GEMMs at "
                     r"128x128: " + num + r" ms \(" + num + r" TFLOP/s\)", line)
        if m:
            ceil = {"gemm_8192_fp16_tflops": float(m[1]), "bert_gemms_128x128_ms": float(m[2]),
                    "bert_gemms_128x128_tflops": float(m[3])}
            continue
        m = re.match(r"logits vs fp32 (\S+)\s+(.+?)\s+rel " + num + " max abs " + num +
                     r" \(\|logit\| max " + num + r"\)", line)
        if m:
            agreement.append({"shape": m[1], "who": m[2], "vs_fp32": {
                "rel_l2": float(m[3]), "max_abs": float(m[4]), "ref_max_abs": float(m[5])}})
    if not results or not ceil:
        raise SystemExit(f"{path}: no torch medians or no cuBLAS ceiling line")
    # A log holding the round twice (grep's summary after the full output) repeats lines.
    results = list({(r["mode"], r["shape"]): r for r in results}.values())
    agreement = list({(a["shape"], a["who"]): a for a in agreement}.values())
    return {"torch": "(not in the log)", "results": results, "ceilings": ceil,
            "agreement": agreement, "source": os.path.basename(path)}


def fmt(v, spec=".2f"):
    return "—" if v is None else format(v, spec)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--machine", default="h200")
    ap.add_argument("--date", default=datetime.date.today().isoformat())
    ap.add_argument("--suffix", default="")
    ap.add_argument("--commit", default="")
    ap.add_argument("--append-perf")
    ap.add_argument("--torch-log")
    args = ap.parse_args()
    surge = json.load(open(os.path.join(args.dir, "surge_bench.json")))
    torch_json = os.path.join(args.dir, "torch_bench.json")
    if os.path.exists(torch_json) or not args.torch_log:
        torch = json.load(open(torch_json))
    else:
        torch = torch_from_log(args.torch_log)
    tests = {}
    for name in ("cuda_backend_test", "cuda_model_test"):
        path = os.path.join(args.dir, f"{name}.json")
        if os.path.exists(path):
            t = json.load(open(path))
            tests[name] = {"tests": t.get("tests"), "failures": t.get("failures"),
                           "disabled": t.get("disabled")}
    ceil = torch["ceilings"]
    peak = ceil["gemm_8192_fp16_tflops"]
    tmed = {}
    for r in torch["results"]:
        if "median_ms" in r:
            tmed[(r["shape"], r["mode"])] = r["median_ms"]

    def best_compile(shape):
        best = None
        for (s, mode), ms in tmed.items():
            if s == shape and mode.startswith("compile:") and (best is None or ms < best[1]):
                best = (mode[len("compile:"):], ms)
        return best

    rows = []
    for r in surge["results"]:
        shape = r["shape"]
        eager, graph = tmed.get((shape, "eager")), tmed.get((shape, "cuda_graph"))
        comp = best_compile(shape)
        tflops = r["flops"] / r["median_ms"] * 1e-9
        rows.append({
            "shape": shape, "surge_variant": r["variant"], "surge_ms": r["median_ms"],
            "surge_tflops": tflops, "surge_pct_of_gemm_ceiling": 100 * tflops / peak,
            "torch_eager_ms": eager, "torch_graph_ms": graph,
            "torch_compile_ms": comp[1] if comp else None,
            "torch_compile_mode": comp[0] if comp else None,
            "x_vs_eager": eager / r["median_ms"] if eager else None,
            "x_vs_graph": graph / r["median_ms"] if graph else None,
            "x_vs_compile": comp[1] / r["median_ms"] if comp else None})

    def row(shape, variant="padding-free"):
        return next((x for x in rows if x["shape"] == shape and x["surge_variant"] == variant), None)

    targets = []
    big, one, posts = row("128x128"), row("1x128"), row("64posts")
    if big:
        targets.append(("128x128 ≥ 1.5× torch.compile", big["x_vs_compile"], 1.5, "×"))
        targets.append(("128x128 ≥ 70 % of the cuBLAS GEMM ceiling",
                        big["surge_pct_of_gemm_ceiling"], 70, "%"))
    if one:
        targets.append(("1x128 ≤ 0.25 ms", one["surge_ms"], 0.25, "ms"))
        targets.append(("1x128 ≥ 3× PyTorch + CUDA graph", one["x_vs_graph"], 3, "×"))
    if posts:
        targets.append(("64 posts ≥ 3× PyTorch padded (eager)", posts["x_vs_eager"], 3, "×"))
        targets.append(("64 posts ≥ 3× PyTorch padded (CUDA graph)", posts["x_vs_graph"], 3, "×"))
    target_rows = []
    for what, got, want, unit in targets:
        met = got is not None and (got <= want if unit == "ms" else got >= want)
        target_rows.append({"target": what, "achieved": got, "met": met})

    out = {"date": args.date, "machine": args.machine, "commit": args.commit, "surge": surge,
           "torch": torch, "tests": tests, "table": rows, "targets": target_rows}
    path = os.path.join("bench", "results", f"{args.date}-gpu-bert-{args.machine}{args.suffix}.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=1)

    lines = []
    lines.append(f"cuBLAS FP16 GEMM ceiling (torch.matmul 8192³, same run): {peak:.0f} TFLOP/s; "
                 f"BERT-base's four GEMMs at 16384 rows × 12 layers through the same cuBLAS: "
                 f"{ceil['bert_gemms_128x128_ms']:.2f} ms ({ceil['bert_gemms_128x128_tflops']:.0f} "
                 f"TFLOP/s). torch {torch['torch']}.")
    lines.append("")
    lines.append("| case | Surge | Surge ms | TFLOP/s (% of ceiling) | torch eager | torch + graph | "
                 "torch.compile (mode) | × eager | × graph | × compile |")
    lines.append("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        comp = "—" if r["torch_compile_ms"] is None else \
            f"{r['torch_compile_ms']:.2f} ({r['torch_compile_mode']})"
        lines.append(
            f"| {r['shape']} | {r['surge_variant']} | {r['surge_ms']:.3f} | "
            f"{r['surge_tflops']:.0f} ({r['surge_pct_of_gemm_ceiling']:.0f} %) | "
            f"{fmt(r['torch_eager_ms'])} | {fmt(r['torch_graph_ms'])} | {comp} | "
            f"{fmt(r['x_vs_eager'])} | {fmt(r['x_vs_graph'])} | {fmt(r['x_vs_compile'])} |")
    lines.append("")
    lines.append("| target | achieved | met |")
    lines.append("| --- | --- | --- |")
    for t in target_rows:
        lines.append(f"| {t['target']} | {fmt(t['achieved'])} | {'yes' if t['met'] else 'no'} |")
    agreement = torch.get("agreement", [])
    if agreement:
        lines.append("")
        lines.append("Logits against an FP32 PyTorch run of the same weights and tokens (relative "
                     "L2 / max abs; largest |logit| in brackets):")
        lines.append("")
        lines.append("| case | who | vs FP32 rel | vs FP32 max abs |")
        lines.append("| --- | --- | --- | --- |")
        for a in agreement:
            e = a["vs_fp32"]
            lines.append(f"| {a['shape']} | {a['who']} | {e['rel_l2']:.2e} | {e['max_abs']:.2e} "
                         f"({e['ref_max_abs']:.2f}) |")
    if tests:
        lines.append("")
        lines.append("GPU tests in the same call: " + "; ".join(
            f"{k} {v['tests']} run, {v['failures']} failed" for k, v in tests.items()) + ".")
    lines.append("")
    lines.append(f"(written by bench/gpu_vs_pytorch/report.py from {path})")
    text = "\n".join(lines)
    print(text)
    if args.append_perf:
        title = f"\n### Round at commit {args.commit or '?'} ({args.date}, one H200)\n\n"
        with open(args.append_perf, "a") as f:
            f.write(title + text + "\n")


if __name__ == "__main__":
    main()
