#!/usr/bin/env bash
# DS-Softmax on PTB-Small: mitosis training 2 → 64 experts (DS-8 is its 8-expert stage), the
# DS-64* variant (pruning may remove a word's last copy, continued from the 32-expert stage),
# test-set accuracy and speed against the full softmax in one bench run, the memory curve
# (Figure D.1), redundancy vs frequency (Figure C.1) and the synthetic check (Appendix A).
# Raw outputs go to experiments/results/ds/; experiments/results/ds-softmax.md discusses them.
#
#   bash experiments/ds.sh            # ~50 min on 2 cores; run it on an otherwise idle machine
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

# 1. Mitosis 2 → 64 experts (k-means gate and splits, λ = 1e-4), every stage saved (ds-2 …
#    ds-32); its 64-expert result, pruned for 2 epochs at λ = 1e-4, is kept as ds-fast.
$B train-head ds --model "$M" --config experiments/configs/ds.json --save-stages --quiet \
    2> "$OUT/train-ds64-mitosis.log"
mv "$M/heads/ds" "$M/heads/ds-fast"
# 2. The shipped DS-64: the last stage again from ds-32 with a lighter lasso (λ = 3e-5, 1 epoch).
$B train-head ds --model "$M" --config experiments/configs/ds-final.json --resume-from ds-32 \
    --lambda 3e-5 --name ds --quiet 2> "$OUT/train-ds64.log"
# 3. DS-64*: the same last stage without the at-least-one-copy constraint.
$B train-head ds --model "$M" --config experiments/configs/ds-final.json --resume-from ds-32 \
    --lambda 3e-5 --allow-lost-words --name ds-star --quiet 2> "$OUT/train-ds64-star.log"
# 4. The same last stage at λ = 5e-5, between ds-fast's 1e-4 and the shipped 3e-5.
$B train-head ds --model "$M" --config experiments/configs/ds-final.json --resume-from ds-32 \
    --lambda 5e-5 --name ds-l5e-5 --quiet 2> "$OUT/train-ds64-l5e-5.log"
# 5. Ablation: a random first gate and Gaussian twin splits (U ± ε), same schedule otherwise.
$B train-head ds --model "$M" --config experiments/configs/ds-random.json --name ds-random --quiet \
    2> "$OUT/train-ds64-random.log"

# 5b. The paper's Algorithm 2: a random first gate and a fresh random gate at every mitosis.
$B train-head ds --model "$M" --config experiments/configs/ds-paper.json --name ds-paper --quiet \
    2> "$OUT/train-ds64-paper.log"

# 6. Test set: accuracy against the next word, P@k against the full softmax, speed (one run,
#    the results file's table).
$B bench --model "$M" --text data/ptb/ptb.test.txt \
    --heads full,ds-2,ds-4,ds-8,ds-16,ds-32,ds,ds-star,ds-fast,ds-l5e-5,ds-random \
    --max-contexts 100000 --repeats 5 --json > "$OUT/bench.jsonl"
# The paper's gate, benched later on its own (accuracy and FLOPs; its times are not comparable).
$B bench --model "$M" --text data/ptb/ptb.test.txt --heads full,ds-paper --max-contexts 100000 \
    --repeats 1 --json > "$OUT/bench-paper.jsonl"

# 7. Figures D.1 (memory, from the mitosis run) and C.1 (redundancy of the shipped head). The
#    shipped head's own memory curve covers only its resumed last stage, so it is not kept.
$B ds-figures --model "$M" --head ds-fast --out "$OUT/mitosis"
$B ds-figures --model "$M" --head ds --out "$OUT"
rm -f "$OUT/memory.png"

# 8. Appendix A.
$B synthetic --supers 10 --subs 10 --out "$OUT/synthetic-10x10" 2> "$OUT/synthetic-10x10.log"
$B synthetic --supers 100 --subs 100 --config experiments/configs/ds-synthetic-100.json --out "$OUT/synthetic-100x100" 2> "$OUT/synthetic-100x100.log"
