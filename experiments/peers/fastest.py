"""The rule every peer script follows: run the peer in its fastest reasonable form.

1. No environment that forces old kernels: `OPENBLAS_CORETYPE` and `OPENBLAS_L2_SIZE` (set on
   these machines for old OpenBLAS builds; they slow a current numpy) are removed, by re-executing
   the script without them before any native library loads.
2. One thread on both sides: every thread pool is pinned to 1 (environment and threadpoolctl).
3. The kernel each native library picked is recorded (threadpoolctl), beside the timings.
4. The natural fast layout (`W @ h` on a row-major `W`, not a transposed view) and a warm-up pass
   before timing; where two layouts are reasonable, time both and report the faster.

Usage, first thing in a peer script, before importing numpy / faiss / torch:

    import fastest
    UNSET = fastest.clean_process()
    import numpy as np
    ...
    row["kernels"] = fastest.kernels()
"""
import json
import os
import sys

SLOW_VARS = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
_MARK = "FASTSOFTMAX_PEER_UNSET"


def clean_process(threads=1):
    """Re-executes the script without `SLOW_VARS` if any is set (OpenBLAS reads them when it
    loads, so they must be gone from the process's start) and pins thread counts to `threads`.
    Returns
    the variables that were removed, {name: value}, to record with the results."""
    removed = {v: os.environ[v] for v in SLOW_VARS if v in os.environ}
    if removed:
        env = {k: v for k, v in os.environ.items() if k not in SLOW_VARS}
        env[_MARK] = json.dumps(removed)
        os.execve(sys.executable, [sys.executable] + sys.argv, env)
    for v in THREAD_VARS:
        os.environ[v] = str(threads)
    return json.loads(os.environ.get(_MARK, "{}"))


def kernels(threads=1):
    """The native thread pools loaded (BLAS, OpenMP) with the kernel each picked, after pinning
    every one to `threads` (1 unless a peer is measured with more on purpose, as training is).
    Needs threadpoolctl (`pip install threadpoolctl`)."""
    from threadpoolctl import threadpool_info, threadpool_limits

    threadpool_limits(limits=threads)
    out = []
    for i in threadpool_info():
        out.append({k: i.get(k) for k in ("internal_api", "version", "architecture", "num_threads")}
                   | {"library": os.path.basename(i.get("filepath", ""))})
        if i.get("num_threads") != threads:
            sys.exit(f"{out[-1]['library']} runs {i.get('num_threads')} threads, not {threads}")
    return out


def describe(kernel_rows, unset):
    """One line for the report: which BLAS kernels ran, and what was unset."""
    blas = [f"{k['internal_api']} {k['version']} ({k['architecture']}, {k['library']})"
            for k in kernel_rows if k.get("architecture")]
    note = f"; unset {', '.join(f'{k}={v}' for k, v in unset.items())}" if unset else ""
    return "kernels: " + ("; ".join(blas) or "none reported") + note
