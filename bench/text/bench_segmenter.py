#!/usr/bin/env python3
"""Surge word segmenter vs Python jieba 0.42.1 lcut(HMM=True), one thread each, same corpus.

Makes (once) a Weibo-like corpus with tools/fixtures/make_text_corpus.py --lines N into bench/work/,
runs Surge's C++ driver (bench/text/segment_bench.cc) and jieba.lcut on every line, checks that
both give the same words on every line, and prints lines/s, the ratio and both dictionary load
times. The result JSON goes to bench/results/<yyyy-mm-dd>-segmenter-cpu.json.

Usage: /usr/bin/python3 bench/text/bench_segmenter.py [--bin build/seg/bench/text/segment_bench]
       [--lines 100000] [--repeats 5] [--jieba-repeats 1]
"""
import argparse
import datetime
import json
import logging
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

import jieba

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", default=os.path.join(ROOT, "build/seg/bench/text/segment_bench"))
    ap.add_argument("--lines", type=int, default=100000)
    ap.add_argument("--repeats", type=int, default=5, help="Surge repeats (median reported)")
    ap.add_argument("--jieba-repeats", type=int, default=1, help="jieba repeats (median)")
    ap.add_argument("--out-dir", default=os.path.join(ROOT, "bench/results"))
    args = ap.parse_args()

    work = os.path.join(ROOT, "bench/work")
    os.makedirs(work, exist_ok=True)
    corpus = os.path.join(work, f"corpus_{args.lines}.txt")
    if not os.path.exists(corpus):
        subprocess.run([sys.executable, os.path.join(ROOT, "tools/fixtures/make_text_corpus.py"),
                        "--lines", str(args.lines), "--out", corpus], check=True)
    with open(corpus, "rb") as f:
        raw = f.read().split(b"\n")
    if raw and raw[-1] == b"":
        raw.pop()
    lines = [b.decode("utf-8") for b in raw]
    nbytes = sum(len(b) for b in raw)

    words_file = os.path.join(work, "surge_words.jsonl")
    res = subprocess.run([args.bin, "--corpus", corpus, "--repeats", str(args.repeats),
                          "--words-out", words_file], check=True, capture_output=True, text=True)
    surge = json.loads(res.stdout)

    # jieba's load time without its on-disk cache (the cache is what a warm start would use).
    jieba.setLogLevel(logging.WARNING)
    with tempfile.TemporaryDirectory() as tmp:
        tok = jieba.Tokenizer()
        tok.tmp_dir = tmp
        t = time.perf_counter()
        tok.initialize()
        jieba_load = time.perf_counter() - t
    jieba.initialize()
    jieba_s = []
    ref = None
    for _ in range(max(1, args.jieba_repeats)):
        t = time.perf_counter()
        ref = [jieba.lcut(l, HMM=True) for l in lines]
        jieba_s.append(time.perf_counter() - t)

    mismatched = 0
    with open(words_file, encoding="utf-8") as f:
        for want, row in zip(ref, f):
            if json.loads(row) != want:
                mismatched += 1
    jieba_med = statistics.median(jieba_s)
    result = {
        "what": "jieba-compatible word segmentation lcut(HMM=True), single thread, Weibo-like corpus",
        "date": datetime.date.today().isoformat(),
        "machine": platform.processor() or platform.machine(),
        "lines": len(lines), "mb": nbytes / 1e6, "words": surge["words"],
        "surge": {"seconds_median": surge["seconds"], "repeat_seconds": surge["repeat_seconds"],
                  "lines_per_s": len(lines) / surge["seconds"],
                  "mb_per_s": nbytes / 1e6 / surge["seconds"],
                  "dict_load_seconds": surge["load_seconds"]},
        "jieba": {"version": jieba.__version__, "seconds_median": jieba_med,
                  "repeat_seconds": jieba_s, "lines_per_s": len(lines) / jieba_med,
                  "dict_load_seconds_no_cache": jieba_load},
        "ratio_lines_per_s": jieba_med / surge["seconds"],
        "words_mismatched_lines": mismatched,
    }
    print(f"corpus: {len(lines)} lines, {nbytes / 1e6:.1f} MB, {surge['words']} words")
    print(f"surge: {result['surge']['lines_per_s']:,.0f} lines/s  "
          f"{result['surge']['mb_per_s']:.1f} MB/s  dict load {surge['load_seconds']:.3f} s")
    print(f"jieba {jieba.__version__}: {result['jieba']['lines_per_s']:,.0f} lines/s  "
          f"dict load {jieba_load:.3f} s (no cache)")
    print(f"ratio: {result['ratio_lines_per_s']:.1f}x   lines with different words: {mismatched}")
    os.makedirs(args.out_dir, exist_ok=True)
    out = os.path.join(args.out_dir, f"{result['date']}-segmenter-cpu.json")
    with open(out, "w") as f:
        json.dump(result, f, indent=1)
        f.write("\n")
    print(f"wrote {out}")
    return 1 if mismatched else 0


if __name__ == "__main__":
    sys.exit(main())
