#!/usr/bin/env bash
# Our `full` and `hnsw` heads against numpy and faiss HNSW on the same output layer and the same
# 5,000 PTB test contexts, single thread, back to back, every peer in its fastest form
# (experiments/peers/README.md). Raw rows go to experiments/results/peers/;
# experiments/results/peers.md and full-softmax.md discuss them. Fails if our full head is slower
# than numpy's product + argpartition at batch 1 (the floor claim).
#
#   PYTHON=python3 bash experiments/peers/run.sh   # ~10 min; needs numpy, faiss-cpu, threadpoolctl
set -euo pipefail
cd "$(dirname "$0")/../.."

cargo build --release
B=./target/release/fastsoftmax
M=$(bash experiments/f32_model.sh ptb-small-lstm)  # the f32 model the results were measured on
N=5000
OUT=experiments/results/peers
mkdir -p "$OUT" runs/peers
$B data fetch ptb
$B export-npy --model $M --text data/ptb/ptb.test.txt --out runs/peers/npy --max-contexts $N
heads=full
for ef in 10 20 40 80 160 320; do heads="$heads,hnsw-ef$ef,hnsw-ip-ef$ef"; done
$B bench --model $M --text data/ptb/ptb.test.txt --max-contexts $N --repeats 5 --heads "$heads" --json > "$OUT/ours.jsonl"
PYTHON=${PYTHON:-python3}
$PYTHON experiments/peers/full_softmax.py --model $M --contexts $N --repeats 5 --json > "$OUT/full_softmax.jsonl"
$PYTHON experiments/peers/full_softmax.py --model $M --contexts $N --repeats 5 | tee "$OUT/full_softmax.txt"
$PYTHON experiments/peers/peers.py --npy runs/peers/npy --contexts $N --k 10 --repeats 5 \
  --ef 10,20,40,80,160,320,640 --json "$OUT/peers.json" | tee "$OUT/peers.txt"
