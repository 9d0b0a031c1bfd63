"""PyTorch peer for surge_cuda_bench: the same BERT-base shape (random weights, FP16, SDPA
attention, pooled output) on the same card, eager and replayed as a CUDA graph, same shapes and
the same log-normal 64-post batch (padded, as PyTorch runs it). Median wall time per forward
including input upload and pooled download, as the Surge side measures.

    python3 torch_bert.py [--json FILE] [--reps N]
"""
import argparse
import json
import time

import numpy as np
import torch
from transformers import BertConfig, BertModel


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--reps", type=int, default=50)
    args = ap.parse_args()
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=21128, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                     intermediate_size=3072, attn_implementation="sdpa")
    model = BertModel(cfg).half().cuda().eval()
    rng = np.random.default_rng(2026)
    lens = np.clip(np.round(rng.lognormal(3.55, 0.45, 64)), 4, 113).astype(int)
    cases = [("1x32", 1, 32, None), ("1x128", 1, 128, None), ("8x128", 8, 128, None),
             ("32x128", 32, 128, None), ("128x64", 128, 64, None), ("128x128", 128, 128, None),
             ("256x128", 256, 128, None), ("64posts", 64, int(lens.max()), lens)]
    results = []
    for name, b, s, ln in cases:
        ids = torch.randint(1000, 21128, (b, s), dtype=torch.int64)
        mask = torch.ones(b, s, dtype=torch.int64)
        if ln is not None:
            for i, l in enumerate(ln):
                mask[i, l:] = 0
        for mode in ("eager", "cuda_graph"):
            d_ids, d_mask = ids.cuda(), mask.cuda()
            with torch.inference_mode():
                if mode == "eager":
                    def step():
                        d_ids.copy_(ids, non_blocking=False)
                        d_mask.copy_(mask)
                        return model(input_ids=d_ids, attention_mask=d_mask).pooler_output.cpu()
                else:
                    s_ = torch.cuda.Stream()
                    s_.wait_stream(torch.cuda.current_stream())
                    with torch.cuda.stream(s_):
                        for _ in range(3):
                            model(input_ids=d_ids, attention_mask=d_mask)
                    torch.cuda.current_stream().wait_stream(s_)
                    g = torch.cuda.CUDAGraph()
                    with torch.cuda.graph(g):
                        static_out = model(input_ids=d_ids, attention_mask=d_mask).pooler_output

                    def step():
                        d_ids.copy_(ids)
                        d_mask.copy_(mask)
                        g.replay()
                        return static_out.cpu()
                for _ in range(5):
                    step()
                torch.cuda.synchronize()
                ms = []
                for _ in range(args.reps):
                    t = time.perf_counter()
                    step()
                    ms.append((time.perf_counter() - t) * 1e3)
            ms.sort()
            med = ms[len(ms) // 2]
            print(f"torch {mode:10s} {name:8s} median {med:8.3f} ms")
            results.append({"shape": name, "mode": mode, "median_ms": med,
                            "p10_ms": ms[len(ms) // 10], "p90_ms": ms[len(ms) * 9 // 10]})
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"torch": torch.__version__, "results": results}, f)


if __name__ == "__main__":
    main()
