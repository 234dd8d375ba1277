#!/usr/bin/env bash
# Translation, ours against the peers on the same split (test = John, 879 verses), 1 thread:
# BLEU (detokenized, sacreBLEU-compatible) and target words/s at beam 1 and 5, rounds
# interleaved so both sides see the same machine load; our engine's time per component.
# Raw rows go to experiments/results/nmt/; experiments/results/nmt.md discusses them.
#
#   PYTHON=/path/to/python bash experiments/nmt.sh [MODEL] [ROUNDS]   # needs torch (and numpy)
#
# With MARIAN=DIR (a model trained by experiments/peers/nmt_marian.sh; PYTHON must then have
# pymarian) Marian decodes the same lines in the same rounds.
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL=${1:-$(bash experiments/bible_f32.sh)}  # the f32 model the results were measured on
ROUNDS=${2:-3}
PYTHON=${PYTHON:-python3}
MARIAN=${MARIAN:-}
# The last model (saved when the budget ends); results/nmt.md says how it was chosen.
MARIAN_MODEL=${MARIAN_MODEL:-model.npz}
OUT=experiments/results/nmt
mkdir -p "$OUT"
cargo build --release
B=./target/release/fastsoftmax
$B data fetch bible
: > "$OUT/rows.jsonl"
for round in $(seq "$ROUNDS"); do
  for beam in 1 5; do
    for batch in 16 1; do
      $B translate --model "$MODEL" --input data/bible/test.en --beam $beam --batch $batch \
        --output "$OUT/ours.beam$beam.de" --stats "$OUT/stats.json" 2>/dev/null
      bleu=$($B bleu --ref data/bible/test.de --hyp "$OUT/ours.beam$beam.de" --json | $PYTHON -c "import json,sys; print(json.load(sys.stdin)['score'])")
      $PYTHON -c "import json,sys; s=json.load(open('$OUT/stats.json')); s.update(system='fastsoftmax', round=$round, bleu=$bleu); print(json.dumps(s))" >> "$OUT/rows.jsonl"
    done
    # The peer: unset the OpenBLAS overrides these machines set for old builds (they slow a
    # current torch), one thread, warm-up inside the script.
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE $PYTHON experiments/peers/nmt_torch.py \
      --model "$MODEL" --input data/bible/test.en --beam $beam \
      --output "$OUT/torch.beam$beam.de" --stats "$OUT/stats.json" --ids "$OUT/torch.beam$beam.ids" 2>/dev/null
    bleu=$($B bleu --ref data/bible/test.de --hyp "$OUT/torch.beam$beam.de" --json | $PYTHON -c "import json,sys; print(json.load(sys.stdin)['score'])")
    $PYTHON -c "import json,sys; s=json.load(open('$OUT/stats.json')); s.update(system='pytorch-eager', round=$round, bleu=$bleu); print(json.dumps(s))" >> "$OUT/rows.jsonl"
    if [ -n "$MARIAN" ]; then
      for batch in 16 1; do
        env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE $PYTHON experiments/peers/nmt_marian_decode.py \
          --dir "$MARIAN" --model "$MARIAN_MODEL" --input data/bible/test.en --beam $beam --batch $batch \
          --output "$OUT/marian.beam$beam.de" --stats "$OUT/stats.json" 2>/dev/null
        bleu=$($B bleu --ref data/bible/test.de --hyp "$OUT/marian.beam$beam.de" --json | $PYTHON -c "import json,sys; print(json.load(sys.stdin)['score'])")
        $PYTHON -c "import json,sys; s=json.load(open('$OUT/stats.json')); s.update(system='marian', round=$round, bleu=$bleu); print(json.dumps(s))" >> "$OUT/rows.jsonl"
      done
    fi
  done
done
rm -f "$OUT/stats.json"
# Greedy parity: the engine's ids against PyTorch's on our exported weights.
$B translate --model "$MODEL" --input data/bible/test.en --beam 1 --json 2>/dev/null > "$OUT/ours.beam1.jsonl"
$PYTHON - "$OUT" <<'PY' | tee "$OUT/summary.txt"
import json, sys, statistics, collections
out = sys.argv[1]
ours = [json.loads(l)["translations"][0]["ids"] for l in open(f"{out}/ours.beam1.jsonl")]
theirs = [json.loads(l) for l in open(f"{out}/torch.beam1.ids")]
same = sum(a == b for a, b in zip(ours, theirs))
print(f"greedy parity: {same}/{len(ours)} lines with identical ids")
rows = [json.loads(l) for l in open(f"{out}/rows.jsonl")]
by = collections.defaultdict(list)
for r in rows:
    by[(r["system"], r["beam"], r["batch"])].append(r)
print("| system | beam | batch | BLEU | words/s (median) | rounds |")
print("| --- | ---: | ---: | ---: | ---: | ---: |")
for (system, beam, batch), rs in sorted(by.items()):
    wps = statistics.median(r["words_per_s"] for r in rs)
    print(f"| {system} | {beam} | {batch} | {rs[0]['bleu']:.2f} | {wps:,.0f} | {len(rs)} |")
for (system, beam, batch), rs in sorted(by.items()):
    if system == "fastsoftmax":
        p = dict(rs[-1]["profile"])
        rows = p.pop("output_rows")
        p.pop("output_logits", None)
        total = sum(p.values())
        gflops = statistics.median(r["output_gflops"] for r in rs)
        print(f"profile beam {beam} batch {batch}: " + " · ".join(f"{k} {100*v/total:.0f}%" for k, v in p.items())
              + f" · output layer {rows} rows at {gflops:.0f} GFLOP/s")
PY
