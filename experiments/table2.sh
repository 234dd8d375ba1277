#!/usr/bin/env bash
# Table 2 of the L2S paper on PTB-small, every method in one run: trains the D-softmax and
# adaptive-softmax variants (their knob is the bucket cut-offs / the head size) on a copy of the
# shipped model, adds the shipped l2s and ds heads, then `fastsoftmax compare` sweeps every
# method's knob on the same 10,000 test contexts and writes
# experiments/results/table2-ptb-small.{md,jsonl} and the P@1/P@5-versus-speedup plots.
#
#   bash experiments/table2.sh            # ~30 min on 2 cores; run it on an otherwise idle machine
#   SKIP_TRAINING=1 bash experiments/table2.sh   # re-measure with the heads already trained
set -euo pipefail
cd "$(dirname "$0")/.."

cargo build --release
B=./target/release/fastsoftmax
SRC=$(bash experiments/f32_model.sh ptb-small-lstm)  # the f32 model the results were measured on
M=runs/table2/ptb-small-lstm
OUT=experiments/results/table2
mkdir -p "$M/heads" "$OUT"
$B data fetch ptb
cp "$SRC"/manifest.json "$SRC"/model.safetensors "$M"/
for h in l2s ds; do rm -rf "$M/heads/$h"; cp -r "$SRC/heads/$h" "$M/heads/$h"; done

if [ -z "${SKIP_TRAINING:-}" ]; then
  # D-softmax: the DS-Softmax paper's split (2,500 / 2,500 / 5,000 words at d, d/2, d/4) and two
  # that put more words in the narrow buckets.
  for cut in 2500,5000 1000,3000 500,2000; do
    $B train-head dsoftmax --model "$M" --config experiments/configs/dsoftmax.json \
      --cutoffs $cut --name "dsoftmax-${cut/,/-}" --quiet 2> "$OUT/train-dsoftmax-${cut/,/-}.log"
  done
  # Adaptive softmax: the head size is the knob (the L2S paper's sweep); tail clusters at d/4, d/16.
  for cut in 500,5000 1000,5000 2000,5000 4000,8000; do
    $B train-head adaptive --model "$M" --config experiments/configs/adaptive.json \
      --cutoffs $cut --name "adaptive-${cut/,/-}" --quiet 2> "$OUT/train-adaptive-${cut/,/-}.log"
  done
fi

$B compare --model "$M" --text data/ptb/ptb.test.txt --max-contexts 10000 --repeats 5 \
  --out experiments/results/table2-ptb-small --notes experiments/results/table2-notes.md
