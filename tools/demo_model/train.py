#!/usr/bin/env python3
"""Trains Surge's demo model: a small BERT with category, sentiment and keyword heads.

The model is trained on labelled posts from `surge simulate` (a training scenario whose events
differ from the default scenario's) and exported the way the trend pipeline loads it
(src/stream/annotate.h, docs/stream.md):

  OUT/model.onnx        inputs input_ids, attention_mask, token_type_ids (int64 [batch, seq]);
                        outputs category_logits [batch, C], sentiment_logits [batch, 3],
                        keyword_logits [batch, seq], embedding [batch, H] (L2-normalised [CLS])
  OUT/vocab.txt         WordPiece vocabulary built from the training posts
  OUT/surge_model.json  tokenizer, label names and output names
  --hf-out DIR          (optional) the same weights as a Hugging Face folder (config.json,
                        model.safetensors, vocab.txt; heads as extra tensors, see MODEL_CARD.md)
  OUT/reference.json    PyTorch's outputs on a few posts (the engine is checked against them)
  OUT/metrics.json      held-out accuracy

Large weights are stored in float16 and cast to float32 inside the graph, which keeps the folder
small; the engine folds the casts at build time.

Runs on the CPU with PyTorch (Debian's python3-torch) and transformers:
  python3 tools/demo_model/train.py --posts P --labels L --eval-posts P2 --eval-labels L2 --out models/demo
(tools/demo_model/make.sh runs the whole recipe.)
"""
import argparse
import json
import math
import os
import random
import sys
import time

import numpy as np
import torch
from torch import nn

CATEGORY_ORDER = None  # filled from the data (sorted, stable)
SENTIMENTS = ["pos", "neu", "neg"]


def read_jsonl(path, limit=None):
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            out.append(json.loads(line))
            if limit and len(out) >= limit:
                break
    return out


def load(posts_path, labels_path, limit=None, seed=0):
    posts = {p["id"]: p for p in read_jsonl(posts_path)}
    labels = read_jsonl(labels_path)
    rng = random.Random(seed)
    rng.shuffle(labels)
    rows = []
    for lab in labels:
        p = posts.get(lab["id"])
        if p is None:
            continue
        rows.append((p["text"], lab))
        if limit and len(rows) >= limit:
            break
    return rows


def build_vocab(texts, size, out_path):
    from tokenizers import BertWordPieceTokenizer
    tok = BertWordPieceTokenizer(lowercase=True, handle_chinese_chars=True, strip_accents=None,
                                 clean_text=True)
    tok.train_from_iterator(texts, vocab_size=size, min_frequency=2,
                            special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"],
                            limit_alphabet=6000)
    vocab = tok.get_vocab()
    words = [w for w, _ in sorted(vocab.items(), key=lambda kv: kv[1])]
    with open(out_path, "w", encoding="utf-8") as f:
        f.write("\n".join(words) + "\n")
    return words


class Encoder:
    """HF's BertTokenizerFast over our vocab: ids plus byte offsets of every token."""

    def __init__(self, vocab_path, max_length):
        from transformers import BertTokenizerFast
        self.tok = BertTokenizerFast(vocab_file=vocab_path, do_lower_case=True,
                                     tokenize_chinese_chars=True)
        self.max_length = max_length

    def __call__(self, texts):
        enc = self.tok(texts, max_length=self.max_length, truncation=True, padding="longest",
                       return_offsets_mapping=True, return_tensors="np")
        return enc

    @staticmethod
    def byte_offsets(text, char_offsets):
        # HF reports code-point offsets; the labels are byte offsets.
        cum = [0]
        for ch in text:
            cum.append(cum[-1] + len(ch.encode("utf-8")))
        return [(cum[a], cum[b]) if b > a else (0, 0) for a, b in char_offsets]


def keyword_targets(text, lab, char_offsets, kinds):
    spans = [(k["start"], k["end"]) for k in lab.get("keywords", []) if k["kind"] in kinds]
    offs = Encoder.byte_offsets(text, char_offsets)
    t = np.zeros(len(offs), np.float32)
    for i, (a, b) in enumerate(offs):
        if b <= a:
            continue
        for s, e in spans:
            if a < e and s < b:
                t[i] = 1.0
                break
    return t


class DemoModel(nn.Module):
    def __init__(self, config, num_categories):
        super().__init__()
        from transformers import BertModel
        self.bert = BertModel(config, add_pooling_layer=True)
        h = config.hidden_size
        self.category = nn.Linear(h, num_categories)
        self.sentiment = nn.Linear(h, 3)
        self.keyword = nn.Linear(h, 1)

    def forward(self, input_ids, attention_mask, token_type_ids):
        out = self.bert(input_ids=input_ids, attention_mask=attention_mask,
                        token_type_ids=token_type_ids)
        seq = out.last_hidden_state
        pooled = out.pooler_output
        cls = seq[:, 0]
        emb = cls / torch.sqrt((cls * cls).sum(-1, keepdim=True) + 1e-12)
        return (self.category(pooled), self.sentiment(pooled), self.keyword(seq).squeeze(-1), emb)


def batches(rows, enc, categories, batch_size, kinds, shuffle, seed):
    idx = list(range(len(rows)))
    if shuffle:
        random.Random(seed).shuffle(idx)
    for s in range(0, len(idx), batch_size):
        chunk = [rows[i] for i in idx[s:s + batch_size]]
        texts = [t for t, _ in chunk]
        e = enc(texts)
        kw = np.zeros(e["input_ids"].shape, np.float32)
        for r, (t, lab) in enumerate(chunk):
            kw[r] = keyword_targets(t, lab, e["offset_mapping"][r].tolist(), kinds)
        cat = np.array([categories.index(lab["category"]) for _, lab in chunk], np.int64)
        sen = np.array([SENTIMENTS.index(lab["sentiment"]) for _, lab in chunk], np.int64)
        special = (e["offset_mapping"][:, :, 1] <= e["offset_mapping"][:, :, 0])
        yield ({k: torch.from_numpy(e[k].astype(np.int64))
                for k in ("input_ids", "attention_mask", "token_type_ids")},
               torch.from_numpy(cat), torch.from_numpy(sen), torch.from_numpy(kw),
               torch.from_numpy(~special & (e["attention_mask"] == 1)))


def evaluate(model, rows, enc, categories, kinds):
    model.eval()
    n = cat_ok = sen_ok = 0
    tp = fp = fn = 0
    with torch.no_grad():
        for x, cat, sen, kw, valid in batches(rows, enc, categories, 256, kinds, False, 0):
            c, s, k, _ = model(**x)
            cat_ok += int((c.argmax(-1) == cat).sum())
            sen_ok += int((s.argmax(-1) == sen).sum())
            n += len(cat)
            pred = (k > 0) & valid
            gold = (kw > 0.5) & valid
            tp += int((pred & gold).sum())
            fp += int((pred & ~gold).sum())
            fn += int((~pred & gold).sum())
    p = tp / max(1, tp + fp)
    r = tp / max(1, tp + fn)
    return {"posts": n, "category_accuracy": cat_ok / max(1, n),
            "sentiment_accuracy": sen_ok / max(1, n), "keyword_token_precision": p,
            "keyword_token_recall": r, "keyword_token_f1": 2 * p * r / max(1e-9, p + r)}


def to_fp16_initializers(path, min_elements=1024):
    """Stores large float initializers as float16 followed by a Cast to float."""
    import onnx
    from onnx import helper, numpy_helper, TensorProto
    m = onnx.load(path)
    g = m.graph
    new_inits, casts = [], []
    for init in g.initializer:
        if init.data_type == TensorProto.FLOAT and int(np.prod(init.dims)) >= min_elements:
            arr = numpy_helper.to_array(init).astype(np.float16)
            half = numpy_helper.from_array(arr, init.name + "_fp16")
            new_inits.append(half)
            casts.append(helper.make_node("Cast", [half.name], [init.name], to=TensorProto.FLOAT,
                                          name=init.name + "_cast"))
        else:
            new_inits.append(init)
    del g.initializer[:]
    g.initializer.extend(new_inits)
    nodes = list(g.node)
    del g.node[:]
    g.node.extend(casts + nodes)
    onnx.checker.check_model(m)
    onnx.save(m, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--posts", required=True)
    ap.add_argument("--labels", required=True)
    ap.add_argument("--eval-posts", required=True, help="held-out posts (other scenario)")
    ap.add_argument("--eval-labels", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--train-posts", type=int, default=60000)
    ap.add_argument("--eval-count", type=int, default=8000)
    ap.add_argument("--epochs", type=float, default=2.0)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--lr", type=float, default=5e-4)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--ffn", type=int, default=768)
    ap.add_argument("--vocab-size", type=int, default=3500)
    ap.add_argument("--max-length", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--hf-out", help="also write the weights as a Hugging Face folder here")
    a = ap.parse_args()

    torch.manual_seed(a.seed)
    random.seed(a.seed)
    torch.set_num_threads(a.threads)
    os.makedirs(a.out, exist_ok=True)
    t0 = time.time()
    rows = load(a.posts, a.labels, a.train_posts + 2000, a.seed)
    dev, train = rows[:2000], rows[2000:]
    held = load(a.eval_posts, a.eval_labels, a.eval_count, a.seed + 1)
    categories = sorted({lab["category"] for _, lab in rows})
    kinds = {"phrase", "term"}
    vocab_path = os.path.join(a.out, "vocab.txt")
    words = build_vocab([t for t, _ in train], a.vocab_size, vocab_path)
    enc = Encoder(vocab_path, a.max_length)
    print(f"data: {len(train)} train, {len(dev)} dev, {len(held)} held-out posts; "
          f"{len(categories)} categories; vocab {len(words)}", flush=True)

    from transformers import BertConfig
    config = BertConfig(vocab_size=len(words), hidden_size=a.hidden, num_hidden_layers=a.layers,
                        num_attention_heads=a.heads, intermediate_size=a.ffn,
                        max_position_embeddings=max(128, a.max_length), type_vocab_size=2,
                        hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)
    model = DemoModel(config, len(categories))
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, weight_decay=0.01)
    steps = int(math.ceil(len(train) / a.batch_size) * a.epochs)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=a.lr, total_steps=steps,
                                                pct_start=0.1)
    ce = nn.CrossEntropyLoss()
    bce = nn.BCEWithLogitsLoss(reduction="none")
    step, epoch = 0, 0
    while step < steps:
        model.train()
        for x, cat, sen, kw, valid in batches(train, enc, categories, a.batch_size, kinds, True,
                                              a.seed + epoch):
            c, s, k, _ = model(**x)
            kl = (bce(k, kw) * valid).sum() / valid.sum().clamp(min=1)
            loss = ce(c, cat) + ce(s, sen) + 2.0 * kl
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            step += 1
            if step % 100 == 0:
                print(f"step {step}/{steps} loss {loss.item():.4f} ({time.time() - t0:.0f} s)",
                      flush=True)
            if step >= steps:
                break
        epoch += 1
    metrics = {"dev (training scenario)": evaluate(model, dev, enc, categories, kinds),
               "held-out (default scenario, unseen events)": evaluate(model, held, enc,
                                                                      categories, kinds),
               "train_posts": len(train), "steps": steps, "seconds": round(time.time() - t0, 1)}
    print(json.dumps(metrics, ensure_ascii=False, indent=1), flush=True)
    model.eval()

    # ONNX export (dynamic batch and sequence).
    sample = enc([t for t, _ in held[:4]])
    x = {k: torch.from_numpy(sample[k].astype(np.int64))
         for k in ("input_ids", "attention_mask", "token_type_ids")}
    onnx_path = os.path.join(a.out, "model.onnx")
    dyn = {0: "batch", 1: "seq"}
    torch.onnx.export(model, (x["input_ids"], x["attention_mask"], x["token_type_ids"]), onnx_path,
                      input_names=["input_ids", "attention_mask", "token_type_ids"],
                      output_names=["category_logits", "sentiment_logits", "keyword_logits",
                                    "embedding"],
                      dynamic_axes={"input_ids": dyn, "attention_mask": dyn,
                                    "token_type_ids": dyn, "category_logits": {0: "batch"},
                                    "sentiment_logits": {0: "batch"}, "keyword_logits": dyn,
                                    "embedding": {0: "batch"}},
                      opset_version=14, do_constant_folding=True)
    to_fp16_initializers(onnx_path)

    # Hugging Face folder: the encoder under BertModel names, the heads as extra tensors.
    if a.hf_out:
        from safetensors.torch import save_file
        os.makedirs(a.hf_out, exist_ok=True)
        state = {k: v.detach().to(torch.float16).contiguous() for k, v in model.state_dict().items()}
        save_file(state, os.path.join(a.hf_out, "model.safetensors"), metadata={"format": "pt"})
        cfg = config.to_dict()
        cfg["architectures"] = ["BertModel"]
        cfg["torch_dtype"] = "float16"
        cfg["surge_heads"] = {"category": "category", "sentiment": "sentiment", "keyword": "keyword"}
        with open(os.path.join(a.hf_out, "config.json"), "w") as f:
            json.dump(cfg, f, indent=1)
        with open(os.path.join(a.hf_out, "vocab.txt"), "w", encoding="utf-8") as f:
            f.write("\n".join(words) + "\n")

    with open(os.path.join(a.out, "surge_model.json"), "w", encoding="utf-8") as f:
        json.dump({"format": 1,
                   "tokenizer": {"kind": "bert_wordpiece", "vocab": "vocab.txt", "lowercase": True,
                                 "max_length": a.max_length},
                   "categories": categories, "sentiments": SENTIMENTS,
                   "outputs": {"category": "category_logits", "sentiment": "sentiment_logits",
                               "keyword": "keyword_logits", "embedding": "embedding"}},
                  f, ensure_ascii=False, indent=1)

    # Reference outputs of the exported (fp16-rounded) weights, for the engine's end-to-end test.
    with torch.no_grad():
        for p in model.parameters():
            if p.numel() >= 1024:
                p.copy_(p.to(torch.float16).to(torch.float32))
        cases = []
        # Four single posts (no padding: every output compared) and one padded batch of four
        # (per-token keyword logits at padding positions are meaningless, so that case keeps only
        # the per-post outputs).
        groups = [[held[i][0]] for i in range(4)] + [[t for t, _ in held[4:8]]]
        for texts in groups:
            e = enc(texts)
            xr = {k: torch.from_numpy(e[k].astype(np.int64))
                  for k in ("input_ids", "attention_mask", "token_type_ids")}
            c, s, k, emb = model(**xr)
            outs = [("category_logits", c), ("sentiment_logits", s), ("embedding", emb)]
            if len(texts) == 1:
                outs.append(("keyword_logits", k))
            cases.append({"texts": texts,
                          "inputs": {n: {"shape": list(v.shape), "data": v.flatten().tolist()}
                                     for n, v in xr.items()},
                          "outputs": {n: {"shape": list(v.shape),
                                          "data": [float(z) for z in v.flatten()]}
                                      for n, v in outs}})
    ref = cases
    with open(os.path.join(a.out, "reference.json"), "w", encoding="utf-8") as f:
        json.dump(ref, f, ensure_ascii=False)
    with open(os.path.join(a.out, "metrics.json"), "w", encoding="utf-8") as f:
        json.dump(metrics, f, ensure_ascii=False, indent=1)
    print(f"wrote {a.out} in {time.time() - t0:.0f} s")


if __name__ == "__main__":
    sys.exit(main())
