#!/usr/bin/env python3
"""End-to-end throughput and quality of `surge trends` on simulator streams.

For each scenario: `surge simulate` writes posts.jsonl + truth.json into a scratch folder, then
`surge trends --json` runs --repeats times (JSONL in, trends out, lexical path unless --model),
and `surge eval --compare trends.jsonl --baseline frequency` scores the last run. Reports the
median posts/s (wall, the pipeline's own clock: reading, parsing, annotate, detect, rank, writing),
the CPU seconds the process used, and the latency percentiles, as JSON on stdout (and --out).

    python3 bench/stream/bench_trends.py --surge build/release/bin/surge \
        --scenario default --scenario tests/fixtures/stream/scenario_b.yaml --repeats 5
"""
import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time


def run(cmd, cwd, env=None):
    t0 = time.time()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=env)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return p.stdout, p.stderr, cpu, time.time() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--surge", default="build/release/bin/surge")
    ap.add_argument("--scenario", action="append", help="'default' or a scenario file")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--model", default="")
    ap.add_argument("--model-every", type=int, default=1,
                    help="run the model on one post in N (surge trends --model-every)")
    ap.add_argument("--taskset", default="", help="CPU list to pin to, e.g. 0,1")
    ap.add_argument("--out", default="")
    a = ap.parse_args()
    surge = os.path.abspath(a.surge)
    prefix = ["taskset", "-c", a.taskset] if a.taskset else []
    results = []
    for scenario in a.scenario or ["default"]:
        with tempfile.TemporaryDirectory(prefix="surge_bench_trends.") as d:
            sim = [surge, "simulate", "--quiet"]
            if scenario != "default":
                sim += ["--scenario", os.path.abspath(scenario)]
            run(sim, d)
            runs = []
            for _ in range(a.repeats):
                cmd = prefix + [surge, "trends", "--json", "--threads", str(a.threads)]
                if a.model:
                    cmd += ["--model", os.path.abspath(a.model),
                            "--model-every", str(a.model_every)]
                out, _, cpu, wall = run(cmd, d)
                j = json.loads(out.strip().splitlines()[-1])
                j["process_cpu_seconds"] = cpu
                j["process_wall_seconds"] = wall
                runs.append(j)
            ev, _, _, _ = run([surge, "eval", "--compare", "trends.jsonl", "--baseline", "frequency",
                               "--json", "-"], d)
            reports = {r["name"]: r["report"] for r in json.loads(ev)["runs"]}
            rates = [r["posts_per_second"] for r in runs]
            results.append({
                "scenario": scenario,
                "posts": runs[0]["posts"],
                "posts_per_second_median": statistics.median(rates),
                "posts_per_second_runs": rates,
                "cpu_seconds_median": statistics.median(r["process_cpu_seconds"] for r in runs),
                "latency_p50_ms_median": statistics.median(r["latency_p50_ms"] for r in runs),
                "latency_p99_ms_median": statistics.median(r["latency_p99_ms"] for r in runs),
                "threads": runs[0]["threads"],
                # The model folder as given (relative to where the script ran), not this
                # machine's absolute path.
                "model": a.model if a.model else runs[0]["model"],
                "model_every": a.model_every if a.model else None,
                "eval": {k: {m: v[m] for m in ("precision_at_k", "recall", "delay_median_buckets",
                                               "delay_p90_buckets", "spam_surfaced",
                                               "duplicate_rate")}
                         for k, v in reports.items()},
            })
    doc = {"what": "surge trends end to end (simulate -> JSONL -> trends)",
           "machine": platform.node(), "cpus": os.cpu_count(),
           "loadavg_before": os.getloadavg(), "taskset": a.taskset, "repeats": a.repeats,
           "results": results}
    text = json.dumps(doc, ensure_ascii=False, indent=1)
    print(text)
    if a.out:
        with open(a.out, "w", encoding="utf-8") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
