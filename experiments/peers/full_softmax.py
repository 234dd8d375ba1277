#!/usr/bin/env python3
"""Side-by-side peer for the full softmax: numpy + OpenBLAS (single thread) against
`fastsoftmax bench --heads full`, on the same model weights and the same contexts, in one run.

numpy computes `H @ W.T + b` then `argpartition` + sort of the top k, exactly the work of our
full head. Usage (from the repository root, after `cargo build --release`):

    python3 experiments/peers/full_softmax.py --model assets/models/ptb-small-lstm \
        --text data/ptb/ptb.test.txt --contexts 5000 [--json]
"""
import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile
import time

os.environ["OPENBLAS_NUM_THREADS"] = "1"
os.environ["OMP_NUM_THREADS"] = "1"
os.environ["MKL_NUM_THREADS"] = "1"
import numpy as np  # noqa: E402  (thread settings must precede the import)


def read_safetensors(path, names):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        base = 8 + n
        out = {}
        for name in names:
            meta = header[name]
            assert meta["dtype"] == "F32", meta
            start, end = meta["data_offsets"]
            f.seek(base + start)
            out[name] = np.frombuffer(f.read(end - start), dtype="<f4").reshape(meta["shape"])
        return out


def median_us(fn, n_queries, repeats):
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1e6 / n_queries)
    return float(np.median(times))


def topk_rows(logits, k):
    idx = np.argpartition(-logits, k, axis=-1)[..., :k]
    part = np.take_along_axis(logits, idx, axis=-1)
    order = np.argsort(-part, axis=-1)
    return np.take_along_axis(idx, order, axis=-1)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="assets/models/ptb-small-lstm")
    ap.add_argument("--text", default="data/ptb/ptb.test.txt")
    ap.add_argument("--contexts", type=int, default=5000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--binary", default="target/release/fastsoftmax")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()

    manifest = json.load(open(os.path.join(a.model, "manifest.json")))
    out_name = "embedding" if manifest["tied"] else "output.weight"
    t = read_safetensors(os.path.join(a.model, "model.safetensors"), [out_name, "output.bias"])
    W = np.ascontiguousarray(t[out_name])  # [vocab, d], row-major as in the engine
    b = np.ascontiguousarray(t["output.bias"])

    with tempfile.TemporaryDirectory() as tmp:
        ctx_path = os.path.join(tmp, "contexts.npy")
        ours = subprocess.run(
            [a.binary, "bench", "--model", a.model, "--text", a.text, "--heads", "full",
             "--max-contexts", str(a.contexts), "--repeats", str(a.repeats), "--json",
             "--save-contexts", ctx_path],
            check=True, capture_output=True, text=True)
        H = np.load(ctx_path)
    ours = json.loads(ours.stdout.strip().splitlines()[0])

    n = H.shape[0]
    Wt = W.T  # a view: numpy calls sgemv/sgemm with the transpose flag, no copy

    def batch1():
        for i in range(n):
            topk_rows(H[i] @ Wt + b, a.k)

    def batch64():
        for s in range(0, n, 64):
            topk_rows(H[s:s + 64] @ Wt + b, a.k)

    # The product alone, without top-k: the stricter floor (our times include the top-k).
    def batch1_logits():
        for i in range(n):
            H[i] @ Wt + b

    def batch64_logits():
        for s in range(0, n, 64):
            H[s:s + 64] @ Wt + b

    np_b1 = median_us(batch1, n, a.repeats)
    np_b64 = median_us(batch64, n, a.repeats)
    np_b1_mm = median_us(batch1_logits, n, a.repeats)
    np_b64_mm = median_us(batch64_logits, n, a.repeats)
    row = {
        "contexts": n,
        "vocab": W.shape[0],
        "d": W.shape[1],
        "numpy_us_b1": np_b1,
        "numpy_us_b64": np_b64,
        "numpy_logits_only_us_b1": np_b1_mm,
        "numpy_logits_only_us_b64": np_b64_mm,
        "ours_us_b1": ours["us_per_query_b1"],
        "ours_us_b64": ours["us_per_query_b64"],
        "ratio_b1_ours_over_numpy": ours["us_per_query_b1"] / np_b1,
        "ratio_b64_ours_over_numpy": ours["us_per_query_b64"] / np_b64,
        "numpy": np.__version__,
        "blas": "OpenBLAS (single thread)",
    }
    if a.json:
        print(json.dumps(row))
    else:
        print(f"{n} contexts, W [{W.shape[0]}, {W.shape[1]}], top-{a.k}, single thread, medians of {a.repeats} passes")
        print(f"{'':14}{'µs/query b1':>14}{'µs/query b64':>14}")
        print(f"{'numpy+OpenBLAS':14}{np_b1:>14.1f}{np_b64:>14.1f}   (H @ W.T + b, argpartition, sort)")
        print(f"{'  logits only':14}{np_b1_mm:>14.1f}{np_b64_mm:>14.1f}   (H @ W.T + b alone)")
        print(f"{'fastsoftmax':14}{ours['us_per_query_b1']:>14.1f}{ours['us_per_query_b64']:>14.1f}   (full head: logits + top-k)")
        print(f"{'ours / numpy':14}{row['ratio_b1_ours_over_numpy']:>14.3f}{row['ratio_b64_ours_over_numpy']:>14.3f}")


if __name__ == "__main__":
    sys.exit(main())
