#!/usr/bin/env python3
"""Fills a weightless ONNX skeleton (tests/fixtures/models/skeletons/*.onnx) with random weights.

The skeletons are real PyTorch exports of BERT-shaped models whose large initializers were moved
to an external file that is not kept. This writes that file again with deterministic random
values (normal, std 0.02; LayerNorm scales near 1), so benchmarks run Surge and its peers on the
same BERT-base-shaped model without committing hundreds of megabytes.

    python3 tools/bench/make_bench_model.py SKELETON.onnx OUT_DIR [--seed 1]
writes OUT_DIR/model.onnx and OUT_DIR/weights.bin.
"""
import argparse
import os
import shutil
import sys
import zlib

import numpy as np
import onnx
from onnx import TensorProto

DTYPES = {TensorProto.FLOAT: np.float32, TensorProto.INT64: np.int64,
          TensorProto.FLOAT16: np.float16, TensorProto.INT32: np.int32}


def fill(name, shape, dtype, seed):
    rng = np.random.default_rng([seed, zlib.crc32(name.encode())])
    if dtype == np.int64 and name.endswith("position_ids"):  # registered buffer: arange
        return np.broadcast_to(np.arange(shape[-1], dtype=np.int64), shape).copy()
    if dtype == np.int64 and name.endswith("token_type_ids"):  # registered buffer: zeros
        return np.zeros(shape, dtype=np.int64)
    if dtype != np.float32:
        raise SystemExit(f"external initializer {name} has dtype {dtype}; no rule to fill it")
    if len(shape) == 1 and "LayerNorm.weight" in name:
        return (1.0 + 0.05 * rng.standard_normal(shape)).astype(np.float32)
    if len(shape) == 1:
        return (0.02 * rng.standard_normal(shape)).astype(np.float32)
    return (0.02 * rng.standard_normal(shape)).astype(np.float32)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("skeleton")
    ap.add_argument("out")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    model = onnx.load(a.skeleton, load_external_data=False)
    total = 0
    with open(os.path.join(a.out, "weights.bin"), "wb") as f:
        for init in model.graph.initializer:
            if init.data_location != TensorProto.EXTERNAL:
                continue
            info = {e.key: e.value for e in init.external_data}
            shape = tuple(init.dims)
            arr = fill(init.name, shape, DTYPES[init.data_type], a.seed)
            offset = int(info.get("offset", 0))
            f.seek(offset)
            data = arr.tobytes()
            if int(info.get("length", len(data))) != len(data):
                raise SystemExit(f"{init.name}: length mismatch in skeleton")
            f.write(data)
            total += len(data)
    shutil.copyfile(a.skeleton, os.path.join(a.out, "model.onnx"))
    print(f"wrote {a.out}/model.onnx with {total / 1e6:.1f} MB of random weights")
    return 0


if __name__ == "__main__":
    sys.exit(main())
