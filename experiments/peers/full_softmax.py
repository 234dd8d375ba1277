#!/usr/bin/env python3
"""Side-by-side peer for the full softmax: numpy + OpenBLAS (single thread) against
`fastsoftmax bench --heads full`, on the same model weights and the same contexts, in one run.

numpy computes the logits `W @ h + b` (W row-major `[vocab, d]`, so BLAS streams it without a
transpose), then `argpartition` and a sort of the k survivors: exactly the work of our full head.
At batch 64 it times both `W @ H.T` and `H @ W.T` and keeps the faster. The peer runs in its
fastest form (`fastest.py`: no forced old OpenBLAS kernel, one thread, warm-up, kernel recorded).

Self-check of the floor claim: exits with status 1 when our full head is slower than numpy's
product + argpartition at batch 1. Usage (from the repository root, after `cargo build --release`):

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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fastest  # noqa: E402

UNSET = fastest.clean_process()  # before numpy loads OpenBLAS
import numpy as np  # noqa: E402


def read_safetensors(path, names):
    """The f32 tensors `names`; a matrix stored as int8 rows (I8 `name` and F32 `name.scale`,
    one scale per row) is widened as the engine widens it on load."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        base = 8 + n

        def read(name, dtype):
            meta = header[name]
            start, end = meta["data_offsets"]
            f.seek(base + start)
            return np.frombuffer(f.read(end - start), dtype=dtype).reshape(meta["shape"])

        out = {}
        for name in names:
            dtype = header[name]["dtype"]
            assert dtype in ("F32", "I8"), header[name]
            if dtype == "F32":
                out[name] = read(name, "<f4")
            else:
                scale = read(name + ".scale", "<f4")
                out[name] = (read(name, "i1").astype(np.float32) * scale[:, None]).astype(np.float32)
        return out


def median_us(fn, n_queries, repeats):
    """Median µs per query over `repeats` timed passes, after one untimed warm-up pass."""
    fn()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1e6 / n_queries)
    return float(np.median(times))


def topk(logits, k, axis=-1):
    """Indices of the k largest logits along `axis`, best first: one partition, then a sort of
    the k survivors only."""
    idx = np.argpartition(logits, -k, axis=axis)
    idx = np.take(idx, np.arange(logits.shape[axis] - k, logits.shape[axis]), axis=axis)
    part = np.take_along_axis(logits, idx, axis=axis)
    return np.take_along_axis(idx, np.flip(np.argsort(part, axis=axis), axis=axis), axis=axis)


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
    k = a.k
    bc = b[:, None]  # [vocab, 1], broadcast over a block's columns
    Wt = W.T  # a view: BLAS gets the transpose flag, no copy

    def batch1():
        for i in range(n):
            topk(W @ H[i] + b, k)

    def batch1_logits():
        for i in range(n):
            W @ H[i] + b

    # Batch 64, both reasonable layouts: logits [vocab, 64] (top-k down the columns) or [64, vocab].
    def batch64_cols():
        for s in range(0, n, 64):
            topk(W @ H[s:s + 64].T + bc, k, axis=0)

    def batch64_rows():
        for s in range(0, n, 64):
            topk(H[s:s + 64] @ Wt + b, k)

    def batch64_cols_logits():
        for s in range(0, n, 64):
            W @ H[s:s + 64].T + bc

    def batch64_rows_logits():
        for s in range(0, n, 64):
            H[s:s + 64] @ Wt + b

    # The layouts compute the same answer (up to summation order on near-ties).
    cols, rows = topk(W @ H[:64].T + bc, k, axis=0).T, topk(H[:64] @ Wt + b, k)
    single = np.stack([topk(W @ H[i] + b, k) for i in range(64)])
    assert (cols[:, 0] == rows[:, 0]).mean() > 0.95 and (single[:, 0] == rows[:, 0]).mean() > 0.95

    kernels = fastest.kernels()
    np_b1 = median_us(batch1, n, a.repeats)
    np_b1_mm = median_us(batch1_logits, n, a.repeats)
    b64 = {"W @ H.T": median_us(batch64_cols, n, a.repeats),
           "H @ W.T": median_us(batch64_rows, n, a.repeats)}
    b64_mm = {"W @ H.T": median_us(batch64_cols_logits, n, a.repeats),
              "H @ W.T": median_us(batch64_rows_logits, n, a.repeats)}
    layout64 = min(b64, key=b64.get)
    np_b64, np_b64_mm = b64[layout64], min(b64_mm.values())
    row = {
        "contexts": n,
        "vocab": W.shape[0],
        "d": W.shape[1],
        "k": k,
        "numpy_us_b1": np_b1,
        "numpy_us_b64": np_b64,
        "numpy_layout_b64": layout64,
        "numpy_us_b64_by_layout": b64,
        "numpy_logits_only_us_b1": np_b1_mm,
        "numpy_logits_only_us_b64": np_b64_mm,
        "ours_us_b1": ours["us_per_query_b1"],
        "ours_us_b64": ours["us_per_query_b64"],
        "ratio_b1_ours_over_numpy": ours["us_per_query_b1"] / np_b1,
        "ratio_b64_ours_over_numpy": ours["us_per_query_b64"] / np_b64,
        "ratio_b1_ours_over_numpy_logits_only": ours["us_per_query_b1"] / np_b1_mm,
        "numpy": np.__version__,
        "kernels": kernels,
        "unset": UNSET,
    }
    floor_ok = ours["us_per_query_b1"] <= np_b1
    if a.json:
        print(json.dumps(row))
    else:
        print(f"{n} contexts, W [{W.shape[0]}, {W.shape[1]}], top-{k}, single thread, warm-up, "
              f"medians of {a.repeats} passes; numpy {np.__version__}, {fastest.describe(kernels, UNSET)}")
        print(f"{'':14}{'µs/query b1':>14}{'µs/query b64':>14}")
        print(f"{'numpy':14}{np_b1:>14.1f}{np_b64:>14.1f}   (W @ h + b, argpartition, sort of k; b64: {layout64})")
        print(f"{'  logits only':14}{np_b1_mm:>14.1f}{np_b64_mm:>14.1f}   (the product + bias alone)")
        print(f"{'fastsoftmax':14}{ours['us_per_query_b1']:>14.1f}{ours['us_per_query_b64']:>14.1f}   (full head: logits + top-k)")
        print(f"{'ours / numpy':14}{row['ratio_b1_ours_over_numpy']:>14.3f}{row['ratio_b64_ours_over_numpy']:>14.3f}")
    print(f"floor check: our full head takes {row['ratio_b1_ours_over_numpy']:.3f}x numpy's time at batch 1: "
          + ("ok" if floor_ok else "FAILED (ours is slower than numpy's product + argpartition)"),
          file=sys.stderr if a.json else sys.stdout)
    return 0 if floor_ok else 1


if __name__ == "__main__":
    sys.exit(main())
