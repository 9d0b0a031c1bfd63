"""Merges one GPU round's surge_bench.json and torch_bench.json (scripts/gpu/check writes both)
into bench/results/<date>-gpu-bert-<machine>.json and prints the ratio table for docs/perf.md.

    python3 bench/gpu_vs_pytorch/report.py DIR_WITH_JSONS [--machine h200] [--date YYYY-MM-DD]
"""
import argparse
import datetime
import json
import os


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--machine", default="h200")
    ap.add_argument("--date", default=datetime.date.today().isoformat())
    args = ap.parse_args()
    surge = json.load(open(os.path.join(args.dir, "surge_bench.json")))
    torch = json.load(open(os.path.join(args.dir, "torch_bench.json")))
    tmed = {(r["shape"], r["mode"]): r["median_ms"] for r in torch["results"]}
    rows = []
    for r in surge["results"]:
        mode = "padding-free" if r["padding_free"] else "padded"
        eager = tmed.get((r["shape"], "eager"))
        graph = tmed.get((r["shape"], "cuda_graph"))
        rows.append({
  "shape" : r["shape"],
            "surge_mode" : mode,
                           "surge_ms" : r["median_ms"],
                                        "torch_eager_ms" : eager,
                                                           "torch_graph_ms"
      : graph,
        "speedup_vs_eager" : eager / r["median_ms"] if eager else None,
        "speedup_vs_graph" : graph / r["median_ms"] if graph else None})
    out = {"date": args.date, "machine": args.machine, "surge": surge, "torch": torch, "table": rows}
    path = os.path.join("bench", "results", f"{args.date}-gpu-bert-{args.machine}.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
    print(f"| batch × seq | Surge mode | Surge ms | torch eager ms | torch + CUDA graph ms | × vs eager | × vs graph |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['shape']} | {r['surge_mode']} | {r['surge_ms']:.2f} | {r['torch_eager_ms']:.2f} | "
              f"{r['torch_graph_ms']:.2f} | {r['speedup_vs_eager']:.2f} | {r['speedup_vs_graph']:.2f} |")
    print(f"(written {path})")


if __name__ == "__main__":
    main()
