#!/usr/bin/env python3
"""Writes the GPU benchmark's model and inputs, so that Surge and PyTorch run the same weights on
the same tokens: a BERT-base-shaped BertForSequenceClassification (12 layers, hidden 768, 12
heads, FFN 3072, vocab 21128, 2 labels) with Hugging Face's random initialisation under a fixed
seed, saved as a Hugging Face folder (config.json + model.safetensors, FP16), and cases.json with
every benchmark case's input_ids / attention_mask.

Cases: full batches (1x32 ... 256x128) and a Weibo-like batch of 64 posts whose lengths are the
quantiles of a log-normal distribution (mu 3.612, sigma 0.46: mean 41.0, longest 113, padded to
113), shuffled. Needs torch and transformers (the GPU machine has both); runs on the CPU.

    python3 tools/bench/make_bert_base_hf.py OUT_DIR [--seed 0]
"""
import argparse
import json
import math
import os
import random
from statistics import NormalDist

VOCAB, HIDDEN, LAYERS, HEADS, FFN = 21128, 768, 12, 12, 3072
FULL = [(1, 32), (1, 128), (8, 128), (32, 128), (128, 64), (128, 128), (256, 128)]
POSTS, POST_MU, POST_SIGMA = 64, 3.612, 0.46


def post_lengths(seed):
    nd = NormalDist()
    lens = [max(4, round(math.exp(POST_MU + POST_SIGMA * nd.inv_cdf((i + 0.5) / POSTS))))
            for i in range(POSTS)]
    random.Random(seed).shuffle(lens)
    return lens


def make_cases(seed):
    rng = random.Random(seed + 1)
    cases = []
    specs = [(f"{b}x{s}", b, s, [s] * b) for b, s in FULL]
    lens = post_lengths(seed)
    specs.append(("64posts", POSTS, max(lens), lens))
    for name, b, s, ls in specs:
        ids, mask = [], []
        for length in ls:
            ids.append([101] + [rng.randrange(1000, VOCAB) for _ in range(length - 1)] +
                       [0] * (s - length))
            mask.append([1] * length + [0] * (s - length))
        cases.append({"name": name, "batch": b, "seq": s, "lengths": ls, "input_ids": ids,
                      "attention_mask": mask})
    return cases


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    import torch
    from transformers import BertConfig, BertForSequenceClassification

    torch.manual_seed(args.seed)
    cfg = BertConfig(vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=LAYERS,
                     num_attention_heads=HEADS, intermediate_size=FFN, hidden_act="gelu",
                     max_position_embeddings=512, type_vocab_size=2, num_labels=2)
    model = BertForSequenceClassification(cfg).eval()
    os.makedirs(args.out, exist_ok=True)
    model.half().save_pretrained(args.out, safe_serialization=True)
    cases = make_cases(args.seed)
    with open(os.path.join(args.out, "cases.json"), "w") as f:
        json.dump({"seed": args.seed, "cases": cases}, f)
    lens = cases[-1]["lengths"]
    print(f"wrote {args.out}: BERT-base seq-cls, seed {args.seed}; 64 posts: mean length "
          f"{sum(lens) / len(lens):.1f}, longest {max(lens)}")


if __name__ == "__main__":
    main()
