"""Tables of experiments/results/l2s-rounds.md from the sweep logs and BLEU rows of
experiments/l2s_rounds.sh: per setting, validation P@1 / P@5 at round 0 (k-means + knapsack)
and at the kept round, and whether the learned rounds raised the training P@5; then BLEU and
output-layer time of each head in the beam."""
import json
import re
import statistics as st
import sys
from pathlib import Path

out = Path(sys.argv[1])
ROUND = re.compile(
    r"round (\d+) \| train P@1 ([\d.]+) P@k ([\d.]+) L̄ [\d.]+ \| valid P@1 ([\d.]+) P@k ([\d.]+)"
)
# What each setting changes in experiments/configs/l2s.json, in the order shown.
CHANGED = {
    "s5": "none: l2s.json (γ 10, init scale 5, λ 3e-4, lr 0.01, τ 1)",
    "g10": "none: l2s.json (γ 10)",
    "g100": "γ 100", "g1": "γ 1", "g0": "**γ 0**", "g0s10": "**γ 0, init scale 10** (l2s-nmt.json)",
    "g0lam0": "γ 0, λ 0",
    "s1": "init scale 1", "s2": "init scale 2", "s10": "init scale 10", "s20": "init scale 20",
    "s50": "init scale 50", "lr0.001": "lr 0.001", "lr0.1": "lr 0.1",
    "s10lr1e-3": "init scale 10, lr 0.001", "t0.5": "τ 0.5", "t2": "τ 2",
    "lam1e-3": "λ 1e-3", "lam3e-3": "λ 3e-3",
}


def runs(log):
    """{setting: (rounds [(train p1, train p5, valid p1, valid p5)], kept round)}"""
    found, name = {}, None
    for line in open(log, encoding="utf-8"):
        if line.startswith("== "):
            name = line.split()[1].rstrip(":").removeprefix("l2s-").removesuffix("-r100-b200")
            found[name] = ([], None)
        elif (m := ROUND.match(line)) and name:
            found[name][0].append(tuple(float(x) for x in m.groups()[1:]))
        elif line.startswith("kept round") and name:
            found[name] = (found[name][0], int(line.split()[2]))
    return found


def table(log, title):
    print(f"### {title}\n")
    print("| setting | round 0 valid P@1 / P@5 | kept round | its valid P@1 / P@5 | Δ valid P@5 | train P@5, round 0 → last |")
    print("| --- | ---: | ---: | ---: | ---: | --- |")
    found = runs(log)
    for name in sorted(found, key=lambda n: list(CHANGED).index(n) if n in CHANGED else len(CHANGED)):
        rounds, kept = found[name]
        first, best, last = rounds[0], rounds[kept], rounds[-1]
        print(
            f"| {CHANGED.get(name, name)} | {first[2]:.4f} / {first[3]:.4f} | {kept} | "
            f"{best[2]:.4f} / {best[3]:.4f} | {best[3] - first[3]:+.4f} | {first[1]:.4f} → {last[1]:.4f} |"
        )
    print()


table(out / "bible-sweep.log", "Bible en→de translator, decoder contexts (one field changed per row)")
table(out / "ptb-sweep.log", "PTB-Small LSTM (the same 300,000-context cap)")

rows = [json.loads(line) for line in open(out / "bleu.jsonl")]
print("### In the beam: John, batch 16, medians of 2 interleaved rounds\n")
print("| head | beam | BLEU | Δ BLEU | words scored per row | output-layer s | output-layer time ÷ |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
for beam in (5, 1):
    full = [r for r in rows if r["beam"] == beam and r["config"] == "none"]
    for config in dict.fromkeys(r["config"] for r in rows):
        mine = [r for r in rows if r["beam"] == beam and r["config"] == config]
        out_s = st.median(r["profile"]["output"] for r in mine)
        ratio = st.median(f["profile"]["output"] / r["profile"]["output"] for f, r in zip(full, mine))
        label = "full softmax" if config == "none" else config.removesuffix("-r100-b200")
        print(
            f"| {label} | {beam} | {mine[0]['bleu']:.2f} | {mine[0]['bleu'] - full[0]['bleu']:+.2f} | "
            f"{mine[0]['logits_per_row']:.0f} | {out_s:.3f} | {ratio:.1f}× |"
        )
