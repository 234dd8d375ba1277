#!/usr/bin/env bash
# The IME paper's Table 2 on KWDLC (issue 19): per softmax method, total and softmax
# milliseconds per key and top-1 / top-10 on the 1,850 evaluation sentences (typed one kana at a
# time, beam 10, one thread), all in this one run against our own full softmax in the same
# decoder; plus the trigram Kneser–Ney rows, and the latency distribution as a plot.
#
#   bash experiments/ime_table2.sh [MODEL_DIR [SELF_NORMALISED_MODEL_DIR [F32_MODEL_DIR [ALPHA1_MODEL_DIR]]]]
#   ONLY=converter bash experiments/ime_table2.sh [MODEL_DIR]
#
# The second model (runs/ime36/sn-779bc84, trained with train.self_norm = 0.1 by
# experiments/ime_table2_models.sh) gives the self-normalisation rows: no normaliser at all, and
# its own full softmax for reference. The third (the converter's LSTM as a `train-lm` folder,
# runs/ime36/lstm-779bc84, from the same script) gives the D-softmax and D-softmax* rows: heads
# trained on its output layer by `train-head dsoftmax|adaptive` (trained here when missing),
# against that model's own full softmax. The fourth (runs/ime36/sn1-779bc84: the second trained
# on with α = 1) gives the α 1 self-normalisation rows. The committed table:
#
#   bash experiments/ime_table2_models.sh
#   MODEL_REV=779bc84 bash experiments/ime_table2.sh "" runs/ime36/sn-779bc84 \
#     runs/ime36/lstm-779bc84 runs/ime36/sn1-779bc84
#
# MODEL_REV=REV takes the converter assets/models/ime-ja held at git revision REV (extracted to
# runs/ime/ime-ja-REV) instead of MODEL_DIR (pass "" for it): the committed table's converter
# rows were measured on 779bc84's, issue 19's converter.
#
# Rows go to experiments/results/ime/table2/*.json, the plot to
# experiments/results/ime/latency.{png,svg}, the table to stdout (experiments/results/ime.md
# discusses it). Run it on a quiet machine: the times are medians of this run only.
set -euo pipefail
cd "$(dirname "$0")/.."
M=${1:-assets/models/ime-ja}
SN=${2:-}
F32=${3:-}
SN1=${4:-}
OUT=experiments/results/ime/table2
mkdir -p "$OUT"
if [ -n "${MODEL_REV:-}" ]; then
  M=runs/ime/ime-ja-$MODEL_REV
  rm -rf "$M" && mkdir -p "$M"
  git archive "$MODEL_REV" assets/models/ime-ja | tar -x -C "$M" --strip-components=3
fi
cargo build --release
B=./target/release/fastsoftmax
[ -f data/ja/stats.json ] && [ -f data/ja/wordfreq.tsv ] ||
  $B data fetch ja --from "${JA_FROM:-../shared/data/ja}"
# The tail estimate of the top-400 sample, fitted on the KWDLC training text (23 s).
[ -f "$M/tail-400.json" ] || $B ime fit-tail --model "$M" --samples 400

run() { # name, then `ime eval` options; the paper's beam 10, the LSTM alone: without the Mozc
  # dictionary and the trigram model a packed converter ships
  local name=$1
  shift
  echo "== $name" >&2
  $B ime eval --json --no-mozc --no-trigram --beam 10 "$@" > "$OUT/$name.json"
}
# ONLY=converter re-runs just the rows of MODEL_DIR (after the converter changed); the table
# and the plot then take the other rows from the earlier run's files.
if [ "${ONLY:-}" != converter ]; then
  run kn3 --lm kn3
  run kn3-adapted --lm kn3 --in-domain data/ja/kwdlc-train.txt
fi
run full --model "$M" --softmax full
run ivs --model "$M" --softmax ivs --sample none
run ivs-top --model "$M" --softmax ivs --sample top --samples 400
run ivs-uniform --model "$M" --softmax ivs --sample uniform --samples 400
run ivs-top-tail --model "$M" --softmax ivs --sample top --samples 400 --tail
run vs-top --model "$M" --softmax vs --sample top --samples 400
if [ -n "$SN" ]; then
  run self-norm --model "$SN" --softmax self-norm
  run self-norm-model-full --model "$SN" --softmax full
fi
if [ -n "$SN1" ]; then
  run self-norm-alpha1 --model "$SN1" --softmax self-norm
  run self-norm-alpha1-model-full --model "$SN1" --softmax full
fi
if [ -n "$F32" ]; then
  train_head() { # kind, cut-offs
    [ -f "$F32/heads/$1/head.json" ] || $B train-head "$1" --model "$F32" --cutoffs "$2" \
      --epochs 2 --max-contexts 0 --train data/ja/kwdlc-train.txt --valid data/ja/valid.txt --quiet
  }
  train_head dsoftmax 2500,10000
  train_head adaptive 2000,10000
  run full-f32 --model "$F32" --softmax full
  run dsoftmax --model "$F32" --head "$F32/heads/dsoftmax"
  run dsoftmax-star --model "$F32" --head "$F32/heads/adaptive"
fi

heads=()
[ -n "$F32" ] && heads=("$OUT/dsoftmax.json" "$OUT/dsoftmax-star.json")
$B ime plot-latency --out experiments/results/ime/latency \
  --input "$OUT/full.json" "${heads[@]}" "$OUT/vs-top.json" "$OUT/ivs-top.json" \
  "$OUT/ivs-top-tail.json" "$OUT/kn3-adapted.json"

python3 - "$OUT" <<'EOF'
import json, sys, os
out = sys.argv[1]
names = ["kn3", "kn3-adapted", "full", "ivs", "ivs-top", "ivs-uniform", "ivs-top-tail", "vs-top",
         "self-norm", "self-norm-model-full", "self-norm-alpha1", "self-norm-alpha1-model-full",
         "full-f32", "dsoftmax", "dsoftmax-star"]
names = [n for n in names if os.path.exists(os.path.join(out, n + ".json"))]
rows = {n: json.load(open(os.path.join(out, n + ".json"))) for n in names}
full = rows["full"]
print("| method | ms per key (median) | p99 | max | softmax ms per key | softmax speedup | logits per key | top-1 % | top-10 % |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
for n in names:
    r = rows[n]
    sm = r.get("softmax_ms_per_key")
    # The heads divide the full softmax of the f32 model they were trained on.
    base = rows["full-f32"] if n in ("dsoftmax", "dsoftmax-star") else full
    speed = f"{base['softmax_ms_per_key'] / sm:.1f}×" if sm else ""
    logits = f"{r['softmax_rows_per_key']:,.0f}" if r.get("softmax_rows_per_key") else ""
    print(f"| {n} | {r['ms_per_key_median']:.3f} | {r['ms_per_key_p99']:.3f} | {r['ms_per_key_max']:.2f} | "
          + (f"{sm:.3f}" if sm else "") + f" | {speed} | {logits} | {100 * r['top1']:.2f} | {100 * r['top10']:.2f} |")
EOF
