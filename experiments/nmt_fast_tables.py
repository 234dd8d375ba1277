"""Tables of experiments/nmt_fast.sh from its raw rows (medians over rounds).

    python3 experiments/nmt_fast_tables.py experiments/results/nmt-fast
"""
import collections
import json
import statistics
import sys

out = sys.argv[1]
rows = [json.loads(l) for l in open(f"{out}/rows.jsonl")]
maps = {m["map"]: m for m in (json.loads(l) for l in open(f"{out}/maps.jsonl"))}
by = collections.defaultdict(list)
for r in rows:
    by[(r["config"], r["beam"], r["batch"])].append(r)


def med(rs, f):
    return statistics.median(f(r) for r in rs)


def seconds(rs):
    return med(rs, lambda r: r["seconds"])


def output_s(rs):
    return med(rs, lambda r: r["profile"]["output"])


rounds = max(len(v) for v in by.values())
print(f"Medians of {rounds} interleaved rounds; John, 879 verses, 1 thread.\n")

base = by[("f32", 5, 16)]
print("## Table 1: vocabulary maps (beam 5, batch 16, per-sentence shortlists)\n")
print("| map | hypotheses | n | min count | N | test coverage | candidates / token | words / row "
      "| file MB | output layer s | vs f32 | BLEU |")
print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
print(f"| none (f32 full) | | | | | 100% | | {med(base, lambda r: r['logits_per_row']):,.0f} | "
      f"| {output_s(base):.2f} | 1 | {base[0]['bleu']:.2f} |")
best = by[("vmap", 5, 16)]
best_map = best[0]["vmap"].rsplit("/", 1)[-1].removesuffix(".vmap")
for name, m in maps.items():
    rs = best if name == best_map else by[(f"table1 {name}", 5, 16)]
    print(f"| {name} | {m.get('unit', 'words')} | {m['max_ngram']} | {m['min_freq']} | {m['per_ngram']} | "
          f"{100 * m['coverage']:.2f}% | {m['candidates_per_token']:.1f} | "
          f"{med(rs, lambda r: r['logits_per_row']):,.0f} | {m['bytes'] / 1e6:.1f} | "
          f"{output_s(rs):.3f} | {output_s(base) / output_s(rs):.1f}× | {rs[0]['bleu']:.2f} |")

print(f"\n## Table 3: decode time (batch 16, map {best_map})\n")
print("| engine | beam | BLEU | decode s | words/s | vs f32 | output layer s | vs f32 |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
for beam in (1, 5):
    b = by[("f32", beam, 16)]
    for config in ("f32", "int16", "int8", "vmap", "vmap-batch", "int16+vmap", "int8+vmap"):
        rs = by[(config, beam, 16)]
        print(f"| {config} | {beam} | {rs[0]['bleu']:.2f} | {seconds(rs):.2f} | "
              f"{med(rs, lambda r: r['words_per_s']):,.0f} | {seconds(b) / seconds(rs):.2f}× | "
              f"{output_s(rs):.3f} | {output_s(b) / output_s(rs):.1f}× |")

print("\n## Figure 3: words/s against the batch size (beam 5)\n")
print("| batch | f32 | vmap (sentence) | vmap (batch union) | int8 + vmap | vmap vs f32 | int8 + vmap vs f32 "
      "| BLEU f32 / vmap / union / int8 + vmap |")
print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
for batch in (1, 4, 16, 64):
    f, v, u, i = (by[(c, 5, batch)] for c in ("f32", "vmap", "vmap-batch", "int8+vmap"))
    wps = [med(x, lambda r: r["words_per_s"]) for x in (f, v, u, i)]
    print(f"| {batch} | {wps[0]:,.0f} | {wps[1]:,.0f} | {wps[2]:,.0f} | {wps[3]:,.0f} | "
          f"{wps[1] / wps[0]:.2f}× | {wps[3] / wps[0]:.2f}× | "
          f"{f[0]['bleu']:.2f} / {v[0]['bleu']:.2f} / {u[0]['bleu']:.2f} / {i[0]['bleu']:.2f} |")

print("\n## Figure 3: BLEU and words/s against the beam (batch 16)\n")
print("| beam | f32 words/s | vmap words/s | int8 + vmap words/s | BLEU f32 / vmap / int8 + vmap |")
print("| ---: | ---: | ---: | ---: | --- |")
for beam in (1, 2, 3, 4, 5):
    f, v, i = (by[(c, beam, 16)] for c in ("f32", "vmap", "int8+vmap"))
    wps = [med(x, lambda r: r["words_per_s"]) for x in (f, v, i)]
    print(f"| {beam} | {wps[0]:,.0f} | {wps[1]:,.0f} | {wps[2]:,.0f} | "
          f"{f[0]['bleu']:.2f} / {v[0]['bleu']:.2f} / {i[0]['bleu']:.2f} |")

print("\n## Screening heads in the beam (batch 16)\n")
heads = {}
for kind in ("l2s", "ds"):
    try:
        heads[kind] = json.load(open(f"{out}/head-{kind}.json"))
    except FileNotFoundError:
        pass


def head_precision(kind):
    """Validation P@1 / P@5 of the head against the full softmax, as its training reported."""
    rep = heads.get(kind, {}).get("training", {}).get("report", {})
    if kind == "l2s" and rep:
        best = rep["rounds"][rep["best_round"]]
        return f"{best['valid_p1']:.4f} / {best['valid_pk']:.4f}"
    if kind == "ds" and rep:
        last = rep["stages"][-1]["valid"]
        return f"{last['p_at_1']:.4f} / –"
    return "–"


print("| head | beam | valid P@1 / P@5 | words / row | BLEU | output layer s | vs f32 | decode s | vs f32 |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
for beam in (1, 5):
    b = by[("f32", beam, 16)]
    for config in ("f32", "l2s", "ds", "int8", "int8+l2s"):
        rs = by.get((config, beam, 16))
        if not rs:
            continue
        prec = "1 / 1" if config in ("f32", "int8") else head_precision(config.removeprefix("int8+"))
        print(f"| {config} | {beam} | {prec} | {med(rs, lambda r: r['logits_per_row']):,.0f} | "
              f"{rs[0]['bleu']:.2f} | {output_s(rs):.3f} | {output_s(b) / output_s(rs):.1f}× | "
              f"{seconds(rs):.2f} | {seconds(b) / seconds(rs):.2f}× |")

print("\n## Where the time goes (beam 5, batch 16)\n")
for config in ("f32", "int16", "int8", "vmap", "int8+vmap", "l2s", "ds", "int8+l2s"):
    if (config, 5, 16) not in by:
        continue
    p = dict(by[(config, 5, 16)][-1]["profile"])
    p.pop("output_rows")
    p.pop("output_logits")
    total = sum(p.values())
    print(f"- {config}: " + " · ".join(f"{k} {100 * v / total:.0f}%" for k, v in p.items()))
