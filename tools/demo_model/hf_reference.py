#!/usr/bin/env python3
"""Completes and checks the demo model's Hugging Face folder (train.py --hf-out).

Loads the folder the way a Hugging Face user would (BertTokenizerFast and BertModel
from_pretrained), then:
  - writes tokenizer_config.json (BERT WordPiece, lower-cased, Chinese characters split) so that
    AutoTokenizer / BertTokenizerFast.from_pretrained(HF) give the ids the model was trained on;
  - checks that the tokenizer reproduces the input ids in MODEL/reference.json and that the
    encoder's L2-normalised [CLS] state equals the ONNX model's `embedding` output stored there;
  - writes HF/reference.json: transformers' last_hidden_state on two of those posts, which Surge's
    engine is checked against after importing the folder (tests/cli/demo_cli_test.cc).

  python3 tools/demo_model/hf_reference.py --model models/demo --hf models/demo/hf
"""
import argparse
import json
import os
import sys

import numpy as np
import torch


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True, help="folder with reference.json (train.py --out)")
    ap.add_argument("--hf", required=True, help="the Hugging Face folder (train.py --hf-out)")
    ap.add_argument("--cases", type=int, default=2, help="posts to store in HF/reference.json")
    a = ap.parse_args()

    for path in (os.path.join(a.hf, "config.json"), os.path.join(a.hf, "model.safetensors"),
                 os.path.join(a.model, "surge_model.json"), os.path.join(a.model, "reference.json")):
        if not os.path.isfile(path):
            sys.exit(f"{path} is missing (run train.py with --out {a.model} --hf-out {a.hf} first)")
    with open(os.path.join(a.hf, "config.json"), encoding="utf-8") as f:
        max_positions = json.load(f)["max_position_embeddings"]
    with open(os.path.join(a.model, "surge_model.json"), encoding="utf-8") as f:
        max_length = json.load(f)["tokenizer"]["max_length"]  # what the model was trained with
    with open(os.path.join(a.hf, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump({"tokenizer_class": "BertTokenizer", "do_lower_case": True,
                   "tokenize_chinese_chars": True, "strip_accents": None,
                   "model_max_length": max_positions,
                   "unk_token": "[UNK]", "sep_token": "[SEP]", "pad_token": "[PAD]",
                   "cls_token": "[CLS]", "mask_token": "[MASK]"}, f, indent=1)

    from transformers import BertModel, BertTokenizerFast
    tok = BertTokenizerFast.from_pretrained(a.hf)
    model = BertModel.from_pretrained(a.hf, torch_dtype=torch.float32).eval()
    with open(os.path.join(a.model, "reference.json"), encoding="utf-8") as f:
        ref = json.load(f)

    singles = [c for c in ref if len(c["texts"]) == 1]
    if len(singles) < a.cases:
        sys.exit(f"{a.model}/reference.json has {len(singles)} single-post cases, need {a.cases}")
    worst = 1.0
    out_cases = []
    with torch.no_grad():
        for i, case in enumerate(singles):
            ids = case["inputs"]["input_ids"]["data"]
            got = tok(case["texts"], max_length=max_length, truncation=True)["input_ids"][0]
            if got != ids:
                sys.exit(f"case {i}: the HF tokenizer gives {got}, the model was trained on {ids}")
            x = {n: torch.tensor(v["data"], dtype=torch.int64).reshape(v["shape"])
                 for n, v in case["inputs"].items()}
            h = model(**x).last_hidden_state
            cls = h[:, 0]
            emb = cls / torch.sqrt((cls * cls).sum(-1, keepdim=True) + 1e-12)
            want = np.array(case["outputs"]["embedding"]["data"], np.float64)
            have = emb.flatten().double().numpy()
            cos = float(have @ want / np.linalg.norm(have) / np.linalg.norm(want))
            worst = min(worst, cos)
            if i < a.cases:
                out_cases.append({"texts": case["texts"], "inputs": case["inputs"],
                                  "outputs": {"last_hidden_state": {
                                      "shape": list(h.shape),
                                      "data": [float(f"{z:.7g}") for z in h.flatten().tolist()]}}})
    if worst < 0.99999:
        sys.exit(f"the HF folder's [CLS] embedding differs from the ONNX model's: cosine {worst}")
    with open(os.path.join(a.hf, "reference.json"), "w", encoding="utf-8") as f:
        json.dump(out_cases, f, ensure_ascii=False)
    print(f"{a.hf}: tokenizer ids match on {len(singles)} posts; [CLS] embedding cosine to the ONNX "
          f"model's >= {worst:.7f}; wrote reference.json ({len(out_cases)} posts)")


if __name__ == "__main__":
    main()
