#!/usr/bin/env python3
"""The tables of experiments/results/candidates.md from what experiments/candidates.sh writes.

    python3 experiments/candidates_tables.py [experiments/results/candidates]

Prints Markdown: Table 2 (every head in one bench run, against the LSTM and its full softmax),
the validation WPR of every training run, the seeded reproduction, Table 2's LSTM baselines and
Table 3. "× full head" divides the full head's time by the head's; "× end to end" divides the
LM step plus the full head by it (`bench`'s `speedup_end_to_end`).
"""
import json
import re
import sys
from pathlib import Path

OUT = Path(sys.argv[1] if len(sys.argv) > 1 else "experiments/results/candidates")


def jsonl(name):
    path = OUT / name
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def last_validation(log):
    """The last `validation WPR …` of a training log: (WPR, P lists, PF lists)."""
    path = OUT / log
    if not path.exists():
        return None
    found = re.findall(r"validation WPR ([0-9.]+)[^;\n]*(?:; on P lists ([0-9.]+), PF lists ([0-9.]+))?",
                       path.read_text())
    return found[-1] if found else None


def times(r):
    return f"{r['speedup_b1']:,.1f}×", f"{r['speedup_end_to_end']:,.1f}×"


def bench_table(rows):
    print("| head | WPR (test) | µs / prediction | × full head | × end to end |")
    print("| --- | ---: | ---: | ---: | ---: |")
    full = next((r for r in rows if r["head"] == "full"), None)
    for r in rows:
        if r["head"] == "full":
            step = r["us_per_word_end_to_end"] - r["us_per_query_b1"]
            print(f"| full (LSTM step + full softmax) | {r['acc_at_1']:.4f} "
                  f"| {step:.1f} + {r['us_per_query_b1']:.1f} | 1× | 1× |")
        else:
            b1, e2e = times(r)
            print(f"| `{r['head']}` | {r['acc_at_1']:.4f} | {r['us_per_query_b1']:.2f} | {b1} | {e2e} |")
    if full:
        print(f"\nThe full softmax's top-5 holds the next word {full['acc_at_5']:.4f} of the time.")


def validation_table():
    print("| training run (log) | validation WPR | on P lists | on PF lists |")
    print("| --- | ---: | ---: | ---: |")
    for log in sorted(OUT.glob("train-*.log")):
        if log.name.startswith("train-lstm"):
            continue
        v = last_validation(log.name)
        if v:
            wpr, p, pf = v
            print(f"| `{log.name}` | {wpr} | {p or '–'} | {pf or '–'} |")


def lstm_table():
    rows = {r["model"]: r for r in jsonl("lstm-bench.jsonl")}
    if not rows:
        return
    print("| model | valid ppl | test ppl | WPR (test) | top-5 | µs b1 (full softmax) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for model, r in rows.items():
        m = json.loads((OUT / f"{model}.metrics.json").read_text())
        print(f"| {model} | {m['valid_ppl']:.2f} | {m['test_ppl']:.2f} | {r['acc_at_1']:.4f} "
              f"| {r['acc_at_5']:.4f} | {r['us_per_query_b1']:.1f} |")


SECTIONS = [
    ("Table 2: one bench over all test positions", "bench.jsonl", lambda: bench_table(jsonl("bench.jsonl"))),
    ("The seeded reproduction beside the shipped head", "repro-bench.jsonl",
     lambda: bench_table(jsonl("repro-bench.jsonl"))),
    ("Table 2's LSTM baselines", "lstm-bench.jsonl", lstm_table),
]

for title, name, table in SECTIONS:
    if not (OUT / name).exists():
        continue
    print(f"### {title} (`candidates/{name}`)\n")
    table()
    print()
print("### Validation WPR of every training run (the last epoch of each log)\n")
validation_table()
