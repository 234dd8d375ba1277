#!/usr/bin/env python3
"""Peers for the softmax heads, timed on the same output layer and contexts as ours: numpy's
exact full softmax and faiss's HNSW graph search (the `hnsw` head's peer), single thread.

Input: the directory written by `fastsoftmax export-npy` (W.npy [vocab, d], b.npy [vocab],
contexts.npy [n, d]). Usage:

    python3 experiments/peers/peers.py --npy runs/npy --contexts 5000 --k 10 --json peers.json

1. numpy full softmax: `W @ h + b`, then `argpartition` + a sort of the k survivors; per query
   (batch 1) and per block of 64 (`H @ W.T`, the faster layout there; see full_softmax.py). Its
   top-k is the exact answer every P@k below is measured against.
2. faiss `IndexHNSWFlat` with M and efConstruction equal to our defaults, in two spaces:
   - `l2`: the MIPS -> nearest-neighbour transform of `crates/infer/src/heads/mips.rs` (rows
     `[w, b, sqrt(phi^2 - |[w, b]|^2)]`, queries `[h, 1, 0]`) searched with the L2 metric, the
     peer of our `hnsw-efE` heads;
   - `ip`: inner product on `[w, b]` and `[h, 1]` directly (`METRIC_INNER_PRODUCT`, no lift), the
     peer of our `hnsw-ip-efE` heads.
   For each efSearch: P@1, P@5, distance evaluations per query (faiss's hnsw_stats), and two
   timings: `search` called once per query (includes ~µs of Python call overhead per query) and
   one `search` call over all queries divided by n (faiss then does nothing but per-query
   searches on one thread: the fair peer of our batch-1 loop).

Times are medians over --repeats passes of wall-clock time (`perf_counter`) after one untimed
warm-up pass; the CPU time of the same passes (`thread_time`, min over passes) is recorded too,
for machines shared with other jobs. Every peer runs in its fastest form (`fastest.py`: no forced
old OpenBLAS kernel, one thread, the kernels it picked recorded).
"""
import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fastest  # noqa: E402

UNSET = fastest.clean_process()  # before numpy and faiss load OpenBLAS
import numpy as np  # noqa: E402
import faiss  # noqa: E402

faiss.omp_set_num_threads(1)


def timed(fn, n, repeats):
    """(median wall µs per query, min CPU µs per query) over `repeats` passes of `fn`, after one
    untimed warm-up pass."""
    fn()
    wall, cpu = [], []
    for _ in range(repeats):
        c = time.thread_time()
        t = time.perf_counter()
        fn()
        wall.append((time.perf_counter() - t) * 1e6 / n)
        cpu.append((time.thread_time() - c) * 1e6 / n)
    return float(np.median(wall)), float(min(cpu))


def topk_rows(logits, k):
    """Indices of the k largest logits of each row (or of a vector), best first: one partition,
    then a sort of the k survivors only."""
    idx = np.argpartition(logits, -k, axis=-1)[..., -k:]
    part = np.take_along_axis(logits, idx, axis=-1)
    order = np.argsort(-part, axis=-1, kind="stable")
    return np.take_along_axis(idx, order, axis=-1)


def precision(got, exact, k):
    """Mean |got[:k] ∩ exact[:k]| / k."""
    return float(np.mean([len(set(g[:k]) & set(e[:k])) / k for g, e in zip(got, exact)]))


def machine():
    model = ""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        model = next((l.split(":", 1)[1].strip() for l in out.splitlines() if l.startswith("Model name")), "")
    except OSError:
        pass
    return {"nproc": os.cpu_count(), "cpu": model or platform.processor(),
            "numpy": np.__version__, "faiss": faiss.__version__,
            "kernels": fastest.kernels(), "unset": UNSET,
            "date": datetime.date.today().isoformat()}


def transformed(W, b, H, space):
    """Rows and queries in `space` ('l2': the sphere transform of mips.rs; 'ip': [w, b] / [h, 1])."""
    X = np.concatenate([W, b[:, None]], axis=1).astype(np.float64)
    ones = np.ones((H.shape[0], 1), dtype=np.float32)
    if space == "ip":
        return X.astype(np.float32), np.concatenate([H, ones], axis=1)
    n2 = (X * X).sum(axis=1)
    lift = np.sqrt(np.maximum(n2.max() - n2, 0.0))  # f64, as mips.rs
    R = np.concatenate([X, lift[:, None]], axis=1).astype(np.float32)
    return R, np.concatenate([H, ones, np.zeros_like(ones)], axis=1)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--npy", required=True, help="directory from `fastsoftmax export-npy`")
    ap.add_argument("--contexts", type=int, default=5000)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--json", help="write the result rows here (a JSON list)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--m", type=int, default=24, help="HNSW M (ours: hnsw::DEFAULT_M)")
    ap.add_argument("--ef-construction", type=int, default=100,
                    help="HNSW efConstruction (ours: hnsw::DEFAULT_EF_CONSTRUCTION)")
    ap.add_argument("--ef", default="10,20,40,80,160,320,640", help="efSearch values to sweep")
    ap.add_argument("--spaces", default="l2,ip", help="faiss spaces: l2 (transform), ip (direct)")
    ap.add_argument("--single-calls", type=int, default=1000,
                    help="queries timed with one `search` call each (0: skip)")
    a = ap.parse_args()

    W = np.ascontiguousarray(np.load(os.path.join(a.npy, "W.npy")), dtype=np.float32)
    b = np.ascontiguousarray(np.load(os.path.join(a.npy, "b.npy")), dtype=np.float32)
    H = np.ascontiguousarray(np.load(os.path.join(a.npy, "contexts.npy"))[:a.contexts], dtype=np.float32)
    n, k = H.shape[0], a.k
    info = machine()
    rows = []
    print(f"{n} contexts, W [{W.shape[0]}, {W.shape[1]}], top-{k}, 1 thread, "
          f"medians of {a.repeats} passes; {info['cpu']} ({info['nproc']} cpus), "
          f"numpy {info['numpy']}, faiss {info['faiss']}; {fastest.describe(info['kernels'], UNSET)}")

    # 1. numpy full softmax.
    Wt = W.T  # a view: BLAS gets the transpose flag, no copy (the faster layout at batch 64)
    exact = topk_rows(H @ Wt + b, k)

    def batch1():
        for i in range(n):
            topk_rows(W @ H[i] + b, k)

    def batch64():
        for s in range(0, n, 64):
            topk_rows(H[s:s + 64] @ Wt + b, k)

    b1, b1_cpu = timed(batch1, n, a.repeats)
    b64, b64_cpu = timed(batch64, n, a.repeats)
    rows.append({"system": "numpy", "setting": "full", "p1": 1.0, "p5": 1.0, "us_b1": b1,
                 "cpu_us_b1": b1_cpu, "us_b64": b64, "cpu_us_b64": b64_cpu, "dots": W.shape[0]})
    print(f"\nnumpy full softmax (W @ h + b, argpartition, sort of k): "
          f"{b1:.1f} µs/query at batch 1 (cpu {b1_cpu:.1f}), {b64:.1f} at batch 64 (cpu {b64_cpu:.1f})")

    # 2. faiss HNSW.
    stats = faiss.cvar.hnsw_stats
    for space in a.spaces.split(","):
        R, Q = transformed(W, b, H, space)
        metric = faiss.METRIC_L2 if space == "l2" else faiss.METRIC_INNER_PRODUCT
        index = faiss.IndexHNSWFlat(R.shape[1], a.m, metric)
        index.hnsw.efConstruction = a.ef_construction
        t = time.perf_counter()
        index.add(R)
        build_s = time.perf_counter() - t
        print(f"\nfaiss IndexHNSWFlat, space {space} ({'L2 on the sphere transform' if space == 'l2' else 'inner product on [w, b]'}), "
              f"M {a.m}, efConstruction {a.ef_construction}: build {build_s:.2f} s")
        print(f"{'efSearch':>9} {'P@1':>7} {'P@5':>7} {'dists':>7} {'µs 1 call':>10} {'cpu':>7} "
              f"{'µs/q calls':>11} {'speedup':>8}")
        for ef in (int(x) for x in a.ef.split(",")):
            index.hnsw.efSearch = ef
            stats.reset()
            _, I = index.search(Q, k)
            dists = stats.ndis / n
            p1 = float(np.mean(I[:, 0] == exact[:, 0]))
            p5 = precision(I, exact, 5)
            one, one_cpu = timed(lambda: index.search(Q, k), n, a.repeats)
            calls = None
            if a.single_calls:
                m = min(a.single_calls, n)

                def per_query():
                    for i in range(m):
                        index.search(Q[i:i + 1], k)

                calls, _ = timed(per_query, m, a.repeats)
            rows.append({"system": "faiss-hnsw", "setting": f"{space}-ef{ef}", "space": space,
                         "m": a.m, "ef_construction": a.ef_construction, "ef_search": ef,
                         "build_s": build_s, "p1": p1, "p5": p5, "dists": dists,
                         "us_b1": one, "cpu_us_b1": one_cpu, "us_per_call": calls,
                         "speedup_vs_numpy_b1": b1 / one})
            calls_s = f"{calls:>11.1f}" if calls is not None else f"{'-':>11}"
            print(f"{ef:>9} {p1:>7.4f} {p5:>7.4f} {dists:>7.0f} {one:>10.2f} {one_cpu:>7.2f} "
                  f"{calls_s} {b1 / one:>8.1f}")
    print("\nµs 1 call: one `search` over all queries / n (the fair batch-1 peer); cpu: its CPU "
          "time (min over passes); µs/q calls: one `search` call per query (adds Python overhead); "
          "speedup: numpy batch 1 / µs 1 call.")
    if a.json:
        for r in rows:
            r.update({"contexts": n, "k": k, "vocab": W.shape[0], "d": W.shape[1], **info})
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)
        print(f"wrote {len(rows)} rows to {a.json}")


if __name__ == "__main__":
    sys.exit(main())
