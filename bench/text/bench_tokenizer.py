#!/usr/bin/env python3
"""Surge BERT WordPiece tokenizer vs Hugging Face `tokenizers`, one thread each, same corpus.

Makes (once) a Weibo-like corpus with tools/fixtures/make_text_corpus.py --lines N into bench/work/,
runs Surge's C++ driver (bench/text/tokenize_bench.cc) and HF's BertWordPieceTokenizer with the
fixture vocabulary on it, checks that both produce the same ids on every line, and prints lines/s,
MB/s and the ratio. The result JSON goes to bench/results/<yyyy-mm-dd>-tokenizer-cpu.json.

Usage: .venv/bin/python bench/text/bench_tokenizer.py [--bin build/tok/bench/text/tokenize_bench]
       [--lines 100000] [--repeats 5]
"""
import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time

os.environ["RAYON_NUM_THREADS"] = "1"  # HF single-threaded; must be set before the import
os.environ["TOKENIZERS_PARALLELISM"] = "false"

import tokenizers  # noqa: E402
from tokenizers import BertWordPieceTokenizer  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--bin", default=os.path.join(ROOT, "build/tok/bench/text/tokenize_bench"))
    ap.add_argument("--lines", type=int, default=100000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--vocab", default=os.path.join(ROOT, "tests/fixtures/text/vocab.txt"))
    ap.add_argument("--out-dir", default=os.path.join(ROOT, "bench/results"))
    args = ap.parse_args()

    work = os.path.join(ROOT, "bench/work")
    os.makedirs(work, exist_ok=True)
    corpus = os.path.join(work, f"corpus_{args.lines}.txt")
    if not os.path.exists(corpus):
        subprocess.run([sys.executable, os.path.join(ROOT, "tools/fixtures/make_text_corpus.py"),
                        "--lines", str(args.lines), "--out", corpus], check=True)
    with open(corpus, encoding="utf-8", newline="") as f:
        lines = f.read().split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    nbytes = sum(len(l.encode("utf-8")) for l in lines)

    ids_file = os.path.join(work, "surge_ids.txt")
    res = subprocess.run([args.bin, "--corpus", corpus, "--vocab", args.vocab, "--repeats",
                          str(args.repeats), "--ids-out", ids_file],
                         check=True, capture_output=True, text=True)
    surge = json.loads(res.stdout)

    tok = BertWordPieceTokenizer(args.vocab)
    batch_s, loop_s = [], []
    encodings = None
    for _ in range(args.repeats):
        t = time.perf_counter()
        encodings = tok.encode_batch(lines)
        batch_s.append(time.perf_counter() - t)
    for _ in range(max(1, args.repeats // 2)):
        t = time.perf_counter()
        for l in lines:
            tok.encode(l)
        loop_s.append(time.perf_counter() - t)

    mismatched = 0
    with open(ids_file) as f:
        for enc, row in zip(encodings, f):
            if [int(x) for x in row.split()] != enc.ids:
                mismatched += 1
    hf_best = min(statistics.median(batch_s), statistics.median(loop_s))
    result = {
        "what": "BERT WordPiece tokenization, single thread, fixture vocab (10k), Weibo-like corpus",
        "date": datetime.date.today().isoformat(),
        "machine": platform.processor() or platform.machine(),
        "lines": len(lines), "mb": nbytes / 1e6, "tokens": surge["tokens"],
        "repeats": args.repeats,
        "surge": {"seconds_median": surge["seconds"], "lines_per_s": len(lines) / surge["seconds"],
                  "mb_per_s": nbytes / 1e6 / surge["seconds"]},
        "hf_tokenizers": {
            "version": tokenizers.__version__,
            "encode_batch_seconds_median": statistics.median(batch_s),
            "encode_loop_seconds_median": statistics.median(loop_s),
            "lines_per_s": len(lines) / hf_best, "mb_per_s": nbytes / 1e6 / hf_best},
        "ratio_lines_per_s": hf_best / surge["seconds"],
        "ids_mismatched_lines": mismatched,
    }
    print(f"corpus: {len(lines)} lines, {nbytes / 1e6:.1f} MB, {surge['tokens']} tokens")
    print(f"surge: {result['surge']['lines_per_s']:,.0f} lines/s  "
          f"{result['surge']['mb_per_s']:.1f} MB/s")
    print(f"hf tokenizers {tokenizers.__version__} (best of encode_batch / encode loop): "
          f"{result['hf_tokenizers']['lines_per_s']:,.0f} lines/s  "
          f"{result['hf_tokenizers']['mb_per_s']:.1f} MB/s")
    print(f"ratio: {result['ratio_lines_per_s']:.1f}x   lines with different ids: {mismatched}")
    os.makedirs(args.out_dir, exist_ok=True)
    out = os.path.join(args.out_dir, f"{result['date']}-tokenizer-cpu.json")
    with open(out, "w") as f:
        json.dump(result, f, indent=1)
        f.write("\n")
    print(f"wrote {out}")
    return 1 if mismatched else 0


if __name__ == "__main__":
    sys.exit(main())
