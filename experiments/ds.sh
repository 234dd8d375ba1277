#!/usr/bin/env bash
# DS-Softmax on PTB-Small: mitosis training 2 → 64 experts (DS-8 is its 8-expert stage), the
# DS-64* variant (pruning may remove a word's last copy, continued from the 32-expert stage),
# test-set accuracy and speed against the full softmax in one bench run, the memory curve
# (Figure D.1), redundancy vs frequency (Figure C.1) and the synthetic check (Appendix A).
# Raw outputs go to experiments/results/ds/; experiments/results/ds-softmax.md discusses them.
#
#   bash experiments/ds.sh            # ~45 min on 2 cores; run it on an otherwise idle machine
#
# Heads are trained into a copy of the model under runs/ so the shipped model keeps only `ds`.
set -euo pipefail
cd "$(dirname "$0")/.."

cargo build --release
B=./target/release/fastsoftmax
SRC=assets/models/ptb-small-lstm
M=runs/ds/model
OUT=experiments/results/ds
mkdir -p "$OUT" "$M"
$B data fetch ptb
cp "$SRC"/manifest.json "$SRC"/model.safetensors "$M"/
rm -rf "$M"/heads

# 1. DS-64 by mitosis, with every stage saved (ds-2 … ds-32).
$B train-head ds --model "$M" --config experiments/configs/ds.json --save-stages --quiet \
    2> "$OUT/train-ds64.log"
# 2. DS-64*: the last stage again from ds-32, without the at-least-one-copy constraint.
$B train-head ds --model "$M" --config experiments/configs/ds.json --resume-from ds-32 \
    --allow-lost-words --name ds-star --quiet 2> "$OUT/train-ds64-star.log"

# 3. Test set: accuracy against the next word, P@k against the full softmax, speed (one run).
$B bench --model "$M" --text data/ptb/ptb.test.txt --heads full,ds-8,ds,ds-star \
    --max-contexts 100000 --repeats 5 --json > "$OUT/bench.jsonl"
$B bench --model "$M" --text data/ptb/ptb.test.txt --heads full,ds-2,ds-4,ds-8,ds-16,ds-32,ds,ds-star \
    --max-contexts 100000 --repeats 3 --markdown > "$OUT/bench-stages.md"

# 4. Figures D.1 and C.1.
$B ds-figures --model "$M" --head ds --out "$OUT"

# 5. Appendix A.
$B synthetic --supers 10 --subs 10 --out "$OUT/synthetic-10x10" 2> "$OUT/synthetic-10x10.log"
$B synthetic --supers 100 --subs 100 --config experiments/configs/ds-synthetic-100.json --out "$OUT/synthetic-100x100" 2> "$OUT/synthetic-100x100.log"
