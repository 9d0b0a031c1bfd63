#!/usr/bin/env python3
"""Generation speed of `surge simulate` on the default scenario, and the raw-frequency baseline's
scores on that stream (`surge eval --baseline frequency`).

Usage: bench/stream/bench_simulate.py [--surge build/release/bin/surge] [--repeats 5] [--out FILE]
Prints a short table and writes a JSON result (default bench/results/<date>-simulate-cpu.json).
"""
import argparse
import datetime
import json
import os
import re
import statistics
import subprocess
import tempfile
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--surge", default="build/release/bin/surge")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as work:
        posts = os.path.join(work, "posts.jsonl")
        truth = os.path.join(work, "truth.json")
        runs = []
        for _ in range(a.repeats):
            t0 = time.perf_counter()
            r = subprocess.run([a.surge, "simulate", "--out", posts, "--truth", truth],
                               capture_output=True, text=True, check=True)
            wall = time.perf_counter() - t0
            m = re.search(r": (\d+) posts over .*\(([\d.]+) s, (\d+) posts/s\)", r.stderr)
            runs.append({"posts": int(m.group(1)), "generate_s": float(m.group(2)),
                         "posts_per_s": int(m.group(3)), "process_wall_s": wall})
        report_path = os.path.join(work, "eval.json")
        t0 = time.perf_counter()
        subprocess.run([a.surge, "eval", "--truth", truth, "--baseline", "frequency", "--posts",
                        posts, "--json", report_path], capture_output=True, text=True, check=True)
        eval_wall = time.perf_counter() - t0
        with open(report_path, encoding="utf-8") as f:
            rep = json.load(f)["runs"][0]["report"]
    keep = ["precision_at_k", "recall", "delay_median_buckets", "delay_p90_buckets",
            "delay_median_detected_buckets", "spam_surfaced", "duplicate_rate", "events",
            "detected", "lists", "slots", "event_slots", "duplicate_slots", "spam_slots",
            "stale_slots", "noise_slots"]
    result = {
        "what": "surge simulate (default scenario, JSONL to a file) and the frequency baseline",
        "date": datetime.date.today().isoformat(),
        "machine": f"{os.cpu_count()}-core CPU (shared)",
        "repeats": a.repeats,
        "posts": runs[0]["posts"],
        "posts_per_s_median": statistics.median(r["posts_per_s"] for r in runs),
        "generate_s_median": statistics.median(r["generate_s"] for r in runs),
        "process_wall_s_median": statistics.median(r["process_wall_s"] for r in runs),
        "runs": runs,
        "frequency_baseline": {k: rep[k] for k in keep},
        "frequency_baseline_eval_wall_s": eval_wall,
    }
    out = a.out or f"bench/results/{result['date']}-simulate-cpu.json"
    with open(out, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print(f"simulate: {result['posts']} posts, median {result['generate_s_median']:.2f} s "
          f"= {result['posts_per_s_median']:.0f} posts/s ({a.repeats} runs)")
    fb = result["frequency_baseline"]
    print("frequency baseline: " + ", ".join(f"{k}={fb[k]}" for k in keep[:7]))
    print(f"-> {out}")


if __name__ == "__main__":
    main()
