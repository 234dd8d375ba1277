"""What the IME peer scripts share: the evaluation set and its options, the sentence-level
candidates of engines that only have per-segment lists, package versions, and the report."""
import argparse
import json
import subprocess
import sys


def parse_args(extra=None):
    """`--eval`, `--limit`, `--json` (and whatever `extra(parser)` adds) → (args, pairs), where
    pairs are the evaluation set's `(reading, display)` lines, cut at `--limit`."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--eval", default="data/ja/eval.tsv")
    ap.add_argument("--limit", type=int)
    ap.add_argument("--json")
    if extra:
        extra(ap)
    a = ap.parse_args()
    pairs = [l.rstrip("\n").split("\t") for l in open(a.eval, encoding="utf-8") if l.strip()]
    return a, (pairs[: a.limit] if a.limit else pairs)


def vary_segments(first, cands, k):
    """Up to k distinct sentences from per-segment lists: the 1-best (`first`, one string a
    segment), then one segment replaced at a time by its 2nd candidate (left to right), then by
    its 3rd, …; `cands[i]` lists segment i's candidates, best first."""
    best = ["".join(first)]
    for rank in range(1, max((len(c) for c in cands), default=0)):
        for i, c in enumerate(cands):
            if rank < len(c) and len(best) < k:
                s = "".join(first[:i] + [c[rank]] + first[i + 1:])
                if s not in best:
                    best.append(s)
    return best


def dpkg_version(pkg):
    out = subprocess.run(["dpkg-query", "-W", "-f=${Version}", pkg], capture_output=True, text=True)
    return out.stdout.strip() or "?"


def emit(report, path):
    """Prints the report on stderr and writes it to `path` (when given) as JSON."""
    print(json.dumps(report, ensure_ascii=False), file=sys.stderr)
    if path:
        with open(path, "w") as f:
            json.dump(report, f, indent=2, ensure_ascii=False)
