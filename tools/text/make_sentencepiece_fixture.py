#!/usr/bin/env python3
"""Trains a tiny SentencePiece unigram model on the fixture corpus and records reference encodings.

Outputs (tests/fixtures/text/):
  spm_tiny.model             the model (unigram, 3000 pieces; small enough to commit)
  spm_reference.jsonl        {"a": line index, "b": line index (pairs only), "ids": [...],
                              "offs": [b0, e0, ...]}: XLM-R style ids (fairseq offset: <s>=0,
                              <pad>=1, </s>=2, <unk>=3, piece p -> p + 1) and byte offsets of each
                              piece in the original line as reported by sentencepiece; single
                              sequences are <s> A </s>, pairs <s> A </s></s> B </s>.
Needs the `sentencepiece` package at the version of the C++ library Surge links (Debian's
libsentencepiece 0.1.97, pinned in tools/requirements.txt): 0.2.x segments a few inputs
differently.
"""
import argparse
import io
import json
import os

import sentencepiece as spm


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--dir", default="tests/fixtures/text")
    ap.add_argument("--vocab-size", type=int, default=3000)
    args = ap.parse_args()
    with open(os.path.join(args.dir, "weibo_corpus.txt"), encoding="utf-8", newline="") as f:
        lines = f.read().split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter([l for l in lines if l.strip()]), model_writer=model,
        vocab_size=args.vocab_size, model_type="unigram", character_coverage=0.9995,
        num_threads=1, seed_sentencepiece_size=200000, shuffle_input_sentence=False,
        minloglevel=2)
    path = os.path.join(args.dir, "spm_tiny.model")
    with open(path, "wb") as f:
        f.write(model.getvalue())
    sp = spm.SentencePieceProcessor(model_file=path)

    def pieces(text):
        try:
            # Offsets in code points (the Python wrapper converts them).
            proto = sp.encode(text, out_type="immutable_proto")
            to_chars = lambda x: x  # noqa: E731
        except (ValueError, TypeError):
            # Newer versions: byte offsets.
            proto = sp.encode(text, return_type="proto")
            raw = text.encode("utf-8")
            to_chars = lambda x: len(raw[:x].decode("utf-8", errors="ignore"))  # noqa: E731
        ids, offs = [], []
        for p in proto.pieces:
            ids.append(3 if p.id == 0 else p.id + 1)
            offs += [to_chars(p.begin), to_chars(p.end)]
        return ids, offs

    with open(os.path.join(args.dir, "spm_reference.jsonl"), "w", newline="\n") as out:
        for i in range(0, len(lines), 4):
            ids, offs = pieces(lines[i])
            rec = {"a": i, "ids": [0] + ids + [2], "offs": [0, 0] + offs + [0, 0]}
            out.write(json.dumps(rec, separators=(",", ":")) + "\n")
        for i in range(1, len(lines), 50):
            j = (i * 31 + 7) % len(lines)
            ia, oa = pieces(lines[i])
            ib, ob = pieces(lines[j])
            rec = {"a": i, "b": j, "ids": [0] + ia + [2, 2] + ib + [2],
                   "offs": [0, 0] + oa + [0, 0, 0, 0] + ob + [0, 0]}
            out.write(json.dumps(rec, separators=(",", ":")) + "\n")


if __name__ == "__main__":
    main()
