#!/usr/bin/env bash
# Our `full` and `hnsw` heads against numpy and faiss HNSW on the same output layer and the same
# 5,000 PTB test contexts, single thread, back to back. Raw rows go to
# experiments/results/peers/; experiments/results/peers.md discusses them.
#
#   bash experiments/peers/run.sh      # ~5 min; needs python3 with numpy and faiss-cpu
set -euo pipefail
cd "$(dirname "$0")/../.."

cargo build --release
B=./target/release/fastsoftmax
M=assets/models/ptb-small-lstm
N=5000
OUT=experiments/results/peers
mkdir -p "$OUT" runs/peers
$B data fetch ptb
$B export-npy --model $M --text data/ptb/ptb.test.txt --out runs/peers/npy --max-contexts $N
heads=full
for ef in 10 20 40 80 160 320; do heads="$heads,hnsw-ef$ef,hnsw-ip-ef$ef"; done
$B bench --model $M --text data/ptb/ptb.test.txt --max-contexts $N --repeats 5 --heads "$heads" --json > "$OUT/ours.jsonl"
python3 experiments/peers/peers.py --npy runs/peers/npy --contexts $N --k 10 --repeats 5 \
  --ef 10,20,40,80,160,320,640 --json "$OUT/peers.json" | tee "$OUT/peers.txt"
