"""The tables of experiments/results/nmt-distill.md from the rows `nmt_distill.sh eval` and
`peers/nmt_marian_tanaka.sh decode` write, so that every number there comes from a row:

    python3 experiments/nmt_distill_tables.py [experiments/results/nmt-distill] > tables.md

- the paper's two findings per pair: distilled − direct BLEU (beam 5, batch 16) and each
  student's BLEU lost from beam 5 to beam 2, with the teacher's BLEU beside;
- Figure 1 as a table: every model and serving at beam 5, batch 16 (BLEU, words/s, size);
- Figure 3: BLEU and words/s at beam 1-5 x batch 1/16/64 for the direct and distilled students
  and the shipped one;
- Table 3: the distilled student's servings (f32, int16, the map, int8 + the map);
- the peers (Marian, PyTorch eager) against our student, one run, when their rows exist.
"""
import json
import sys
from pathlib import Path


def rows(path):
    return [json.loads(line) for line in open(path)] if path.exists() else []


def find(rs, **want):
    return next((r for r in rs if all(r.get(k) == v for k, v in want.items())), None)


def main():
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "experiments/results/nmt-distill")
    rs = rows(out / "rows.jsonl")
    pairs = list(dict.fromkeys(r["pair"] for r in rs))

    print("### The paper's findings\n")
    print("| pair | student | teacher BLEU | direct BLEU | distilled BLEU | distilled − direct | direct: beam 5 → 2 | distilled: beam 5 → 2 |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    students = [("tiny GRU", "direct", "distilled-tiny"),
                ("tiny LSTM", "direct-tiny-lstm", "distilled-tiny-lstm")]
    for p in pairs:
        for name, direct, distilled in students:
            cell = lambda m, beam: find(rs, pair=p, model=m, beam=beam, batch=16)
            t, d5, s5 = cell("teacher", 5), cell(direct, 5), cell(distilled, 5)
            d2, s2 = cell(direct, 2), cell(distilled, 2)
            if not (t and d5 and s5 and d2 and s2):
                continue
            print(f"| {p} | {name} | {t['bleu']:.2f} | {d5['bleu']:.2f} | {s5['bleu']:.2f} "
                  f"| {s5['bleu'] - d5['bleu']:+.2f} | {d2['bleu'] - d5['bleu']:+.2f} "
                  f"| {s2['bleu'] - s5['bleu']:+.2f} |")

    print("\n### Figure 1: BLEU against words/s (beam 5, batch 16, 1 thread)\n")
    print("| pair | model | BLEU | words/s | size (MB) |")
    print("| --- | --- | ---: | ---: | ---: |")
    for r in rs:
        if r["beam"] == 5 and r["batch"] == 16:
            print(f"| {r['pair']} | {r['model']} | {r['bleu']:.2f} | {r['words_per_s']:,.0f} | {r['bytes'] / 1e6:.1f} |")

    print("\n### Figure 3: beam × batch (BLEU / words/s, 1 thread)\n")
    print("The students in f32; the shipped one int8 with its map, as an app serves it.\n")
    for p in pairs:
        for m in ["direct", "distilled-tiny", "shipped int8+vmap"]:
            grid = [r for r in rs if r["pair"] == p and r["model"] == m]
            batches = sorted({r["batch"] for r in grid})
            beams = sorted({r["beam"] for r in grid})
            if len(batches) < 2:
                continue
            print(f"**{p}, {m}**\n")
            print("| beam | " + " | ".join(f"batch {b}" for b in batches) + " |")
            print("| ---: | " + " | ".join("---:" for _ in batches) + " |")
            for beam in beams:
                cells = []
                for b in batches:
                    r = find(grid, beam=beam, batch=b)
                    cells.append(f"{r['bleu']:.2f} / {r['words_per_s']:,.0f}" if r else "")
                print(f"| {beam} | " + " | ".join(cells) + " |")
            print()

    print("### Table 3: the distilled student's servings (batch 16)\n")
    print("| pair | serving | beam | BLEU | words/s | × f32 |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    for p in pairs:
        base = find(rs, pair=p, model="distilled-tiny", beam=5, batch=16)
        for r in rs:
            if r["pair"] == p and r["model"].startswith("distilled-tiny") and r["batch"] == 16 \
                    and (r["model"] != "distilled-tiny" or r["beam"] == 5) and "lstm" not in r["model"]:
                speed = f"{r['words_per_s'] / base['words_per_s']:.2f}×" if base else ""
                serving = r["model"].removeprefix("distilled-tiny").strip() or "f32"
                print(f"| {p} | {serving} | {r['beam']} | {r['bleu']:.2f} | {r['words_per_s']:,.0f} | {speed} |")

    marian = rows(out / "marian.jsonl")
    if marian:
        print("\n### Peers against our student (Tanaka test, beam 5, 1 thread, one run)\n")
        print("PyTorch eager decodes one sentence (with its beams) at a time; the others batches of 16.\n")
        fastest = max((r for r in marian if r["system"] == "marian"), key=lambda r: r["words_per_s"])
        print("| system | config | batch | BLEU | words/s | × Marian's fastest |")
        print("| --- | --- | ---: | ---: | ---: | ---: |")
        for r in marian:
            print(f"| {r['system']} | {r['config']} | {r.get('batch', 16)} | {r['bleu']:.2f} "
                  f"| {r['words_per_s']:,.0f} | {r['words_per_s'] / fastest['words_per_s']:.2f}× |")


if __name__ == "__main__":
    main()
