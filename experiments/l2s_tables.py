#!/usr/bin/env python3
"""The tables of experiments/results/l2s.md from the rows experiments/l2s.sh writes.

    python3 experiments/l2s_tables.py [experiments/results/l2s]

Prints Markdown: the budget sweep (Table 5), Table 4, Table 6 with the rank-20 fallback and
its other methods, and the Brown corpus. Speedups divide our own exact softmax, timed in the
same process on the same contexts.
"""
import json
import sys
from pathlib import Path

OUT = Path(sys.argv[1] if len(sys.argv) > 1 else "experiments/results/l2s")
VOCAB = 10_000


def rows(name):
    path = OUT / name
    if not path.exists():
        return {}
    return {r["head"]: r for r in map(json.loads, path.read_text().splitlines()) if r}


def label(head):
    """sweep-l2s-r100-b200 → "L2S, B = 200"; table4-r50 → "L2S r = 50"."""
    parts = head.split("-")
    if head.startswith("sweep-"):
        kind = "L2S" if parts[1] == "l2s" else "k-means"
        return f"{kind}, B = {parts[3][1:]}"
    if head.startswith("table4-"):
        return f"L2S r = {parts[1][1:]}"
    return head


def scanned(r, clusters):
    """L̄: candidates per query, from the dot products the head does (r + L̄ = V / ×FLOP)."""
    return VOCAB / r["flop_speedup"] - clusters


def x(v, digits=1):
    return f"{v:,.{digits}f}×"


def sweep(bench):
    print("| head | P@1 | P@5 | acc@1 | µs/q b1 | µs/q b64 | ×b1 | ×b64 | ×FLOP |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    full = bench["full"]
    print(f"| full | 1 | 1 | {full['acc_at_1']:.4f} | {full['us_per_query_b1']:.2f} "
          f"| {full['us_per_query_b64']:.2f} | 1× | 1× | 1× |")
    for b in (25, 50, 75, 100, 150, 200, 300):
        for kind in ("kmeans", "l2s"):
            r = bench.get(f"sweep-{kind}-r100-b{b}")
            if r is None:
                continue
            name = label(r["head"])
            if b == 300:
                name += f" (L̄ {scanned(r, 100):.0f})"
            if kind == "l2s":
                name = f"**{name}**"
            print(f"| {name} | {r['p_at_1']:.4f} | {r['p_at_5']:.4f} | {r['acc_at_1']:.4f} "
                  f"| {r['us_per_query_b1']:.2f} | {r['us_per_query_b64']:.2f} "
                  f"| {x(r['speedup_b1'])} | {x(r['speedup_b64'])} | {x(r['flop_speedup'])} |")


def table4(bench):
    print("| r | B | P@1 | P@5 | µs/q b1 | ×b1 | ×FLOP |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r_, b in ((50, 250), (100, 200), (200, 100), (250, 50)):
        r = bench.get(f"table4-r{r_}")
        if r is None:
            continue
        print(f"| {r_} | {b} | {r['p_at_1']:.4f} | {r['p_at_5']:.4f} "
              f"| {r['us_per_query_b1']:.2f} | {x(r['speedup_b1'])} | {x(r['flop_speedup'])} |")


def table6(fallback):
    print("| head | exact ppl | screened ppl | µs/token exact | µs/token screened | speedup | ×FLOP |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in fallback.values():
        print(f"| {label(r['head'])} | {r['ppl_full']:.2f} | {r['ppl_head']:.2f} "
              f"| {r['us_per_token_full']:.1f} | {r['us_per_token_head']:.1f} "
              f"| {x(r['speedup'], 2)} | {x(r['flop_speedup'], 2)} |")


def table6_methods(methods):
    print("| head | perplexity | vs exact | µs/token exact | µs/token head | speedup | ×FLOP |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in methods.values():
        more = 100 * (r["ppl_head"] / r["ppl_full"] - 1)
        print(f"| `{r['head']}` | {r['ppl_head']:.2f} | {more:+.1f} % "
              f"| {r['us_per_token_full']:.1f} | {r['us_per_token_head']:.1f} "
              f"| {x(r['speedup'], 2)} | {x(r['flop_speedup'], 2)} |")


def brown(bench):
    print("| head | P@1 | P@5 | acc@1 | µs/q b1 | ×b1 | ×FLOP |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for head in ("full", "sweep-l2s-r100-b100", "sweep-l2s-r100-b200",
                 "sweep-kmeans-r100-b200", "table4-r50"):
        r = bench.get(head)
        if r is None:
            continue
        print(f"| {label(head)} | {r['p_at_1']:.4f} | {r['p_at_5']:.4f} | {r['acc_at_1']:.4f} "
              f"| {r['us_per_query_b1']:.2f} | {x(r['speedup_b1'])} | {x(r['flop_speedup'])} |")


SECTIONS = [
    ("The budget sweep (Table 5), PTB test", "bench-ptb-test.jsonl", sweep),
    ("Table 4: clusters at r + B = 300", "bench-ptb-test.jsonl", table4),
    ("Table 6: perplexity with a rank-20 fallback", "table6.jsonl", table6),
    ("Table 6's other methods (shipped model and heads)", "table6-methods.jsonl", table6_methods),
    ("Out of domain: Brown", "bench-brown.jsonl", brown),
]

for title, name, table in SECTIONS:
    found = rows(name)
    if not found:
        continue
    print(f"### {title} (`l2s/{name}`)\n")
    table(found)
    print()
