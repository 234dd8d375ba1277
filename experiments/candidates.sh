#!/usr/bin/env bash
# The candidate attention predictor on PTB (experiments/results/candidates.md): the factorised
# (r = 10) and unfactorised networks, distilled from the shipped LSTM, the trigram model alone,
# and the full-softmax LSTM, all benchmarked on every PTB test position in one run.
#
#   bash experiments/candidates.sh     # ~25 min on 2 cores
set -euo pipefail
cd "$(dirname "$0")/.."

cargo build --release
B=./target/release/fastsoftmax
SRC=assets/models/ptb-small-lstm
M=runs/candidates/ptb-small-lstm
OUT=experiments/results/candidates
mkdir -p "$M" "$OUT"
$B data fetch ptb
cp "$SRC"/manifest.json "$SRC"/model.safetensors "$M"/
$B train-head candidates --model "$M" --config experiments/configs/candidates.json \
  --name candidates-np 2> "$OUT/train-factorised.log"
$B train-head candidates --model "$M" --config experiments/configs/candidates.json --rank 0 \
  --name candidates-full-np 2> "$OUT/train-unfactorised.log"
rm -rf "$M/heads/trigram" && mv "$M/heads/candidates-np-trigram" "$M/heads/trigram"
$B bench --model "$M" --text data/ptb/ptb.test.txt --max-contexts 100000 --repeats 3 --json \
  --heads full,trigram,candidates-np,candidates-full-np > "$OUT/bench.jsonl" 2> "$OUT/bench.log"
