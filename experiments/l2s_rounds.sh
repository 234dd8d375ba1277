#!/usr/bin/env bash
# Issue 36 item 1: why L2S's learned rounds did not help on the translator's decoder contexts,
# and what makes them help (experiments/results/l2s-rounds.md).
#
# The shipped Bible translator's L2S head kept round 0 (spherical k-means + the knapsack):
# every Gumbel round lowered validation P@5. This sweeps one field of experiments/configs/l2s.json
# at a time (the budget term's weight γ, the init scale, λ, the learning rate, the temperature)
# on the same 300,000 teacher-forced contexts, re-runs the default and γ = 0 on PTB, and decodes
# John with the heads that matter (BLEU at beam 5 and 1, batch 16, two rounds interleaved).
# Heads are trained into copies of the shipped models under $RUNS (never into assets/).
#
#   bash experiments/l2s_rounds.sh            # ~45 min on 2 cores
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release
B=./target/release/fastsoftmax
OUT=experiments/results/l2s-rounds
RUNS=${RUNS:-runs/l2s-rounds}
mkdir -p "$OUT" "$RUNS/cfg-bible" "$RUNS/cfg-ptb"
$B data fetch bible
$B data fetch ptb

# copy MODEL DIR: the model's files without its heads.
copy() {
  rm -rf "$2"
  mkdir -p "$2"
  for f in "$1"/*; do [ "$(basename "$f")" = heads ] || cp -r "$f" "$2/"; done
}
copy "$(bash experiments/bible_f32.sh)" "$RUNS/bible"  # the f32 model the head was trained on
copy "$(bash experiments/f32_model.sh ptb-small-lstm)" "$RUNS/ptb"

# One config per setting: l2s.json with one field changed (s5 is l2s.json itself, the shipped
# head's config), 300,000 contexts each, as the shipped translator head was trained.
python3 - "$RUNS" <<'PY'
import json, sys
runs = sys.argv[1]
base = json.load(open("experiments/configs/l2s.json"))
base["max_contexts"] = 300000
bible = {
    "s5": {}, "s1": {"init_scale": 1.0}, "s2": {"init_scale": 2.0}, "s10": {"init_scale": 10.0},
    "s20": {"init_scale": 20.0}, "s50": {"init_scale": 50.0},
    "lr0.001": {"lr": 0.001}, "lr0.1": {"lr": 0.1}, "s10lr1e-3": {"init_scale": 10.0, "lr": 0.001},
    "t0.5": {"temperature": 0.5}, "t2": {"temperature": 2.0},
    "lam1e-3": {"lambda": 0.001}, "lam3e-3": {"lambda": 0.003},
    "g100": {"gamma": 100.0}, "g1": {"gamma": 1.0}, "g0": {"gamma": 0.0},
    "g0lam0": {"gamma": 0.0, "lambda": 0.0}, "g0s10": {"gamma": 0.0, "init_scale": 10.0},
}
for name, change in bible.items():
    json.dump({**base, **change}, open(f"{runs}/cfg-bible/{name}.json", "w"))
for name, change in {"g10": {}, "g0": {"gamma": 0.0}}.items():
    json.dump({**base, **change}, open(f"{runs}/cfg-ptb/{name}.json", "w"))
PY
# The translator config is the γ = 0, init 10 setting.
cmp -s <(python3 -c "import json; print(json.load(open('$RUNS/cfg-bible/g0s10.json')))") \
  <(python3 -c "import json; print(json.load(open('experiments/configs/l2s-nmt.json')))") ||
  echo "note: experiments/configs/l2s-nmt.json is no longer the g0s10 setting" >&2

$B train-head l2s --model "$RUNS/bible" --config "$(ls "$RUNS"/cfg-bible/*.json | paste -sd,)" \
  --quiet > "$OUT/bible-sweep.log" 2>&1
$B train-head l2s --model "$RUNS/ptb" --config "$RUNS/cfg-ptb/g10.json,$RUNS/cfg-ptb/g0.json" \
  --quiet > "$OUT/ptb-sweep.log" 2>&1

# BLEU and output-layer time of the full softmax, the default head (k-means kept) and the γ = 0
# heads, rounds interleaved; one row per decode.
: > "$OUT/bleu.jsonl"
for round in 1 2; do
  for beam in 5 1; do
    for head in none l2s-s5-r100-b200 l2s-g0-r100-b200 l2s-g0s10-r100-b200; do
      args=()
      [ "$head" = none ] || args=(--head "$head")
      $B translate --model "$RUNS/bible" --input data/bible/test.en --beam "$beam" --batch 16 \
        "${args[@]}" --output "$RUNS/hyp.de" --stats "$RUNS/stats.json" 2>/dev/null
      bleu=$($B bleu --ref data/bible/test.de --hyp "$RUNS/hyp.de" --json)
      python3 - "$RUNS/stats.json" "$bleu" "$head" "$round" <<'PY' >> "$OUT/bleu.jsonl"
import json, sys
row = json.load(open(sys.argv[1]))
row.update(config=sys.argv[3], round=int(sys.argv[4]), bleu=json.loads(sys.argv[2])["score"])
print(json.dumps(row))
PY
    done
  done
done
python3 experiments/l2s_rounds_tables.py "$OUT" > "$OUT/tables.md"
cat "$OUT/tables.md"
