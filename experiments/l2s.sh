#!/usr/bin/env bash
# L2S on PTB-Small: the budget sweep (Figures 3/6 style), Table 4 (number of clusters at matched
# time), Table 5 (L2S vs spherical k-means only), Table 6 (perplexity with a rank-20 fallback)
# and the out-of-domain check on the Brown corpus. Raw outputs go to experiments/results/l2s/,
# their tables to l2s/tables.md (experiments/l2s_tables.py); experiments/results/l2s.md discusses
# them.
#
#   bash experiments/l2s.sh            # ~40 min on 2 cores; run it on an otherwise idle machine
#   ONLY=table6 bash experiments/l2s.sh   # step 4b alone (Table 6's other methods), ~15 min
#
# Heads are trained into a copy of the model under runs/ so the shipped model keeps only `l2s`.
set -euo pipefail
cd "$(dirname "$0")/.."

cargo build --release
B=./target/release/fastsoftmax
SRC=$(bash experiments/f32_model.sh ptb-small-lstm)  # the f32 model the results were measured on
M=runs/exp-l2s/ptb-small-lstm
OUT=experiments/results/l2s
TEST=data/ptb/ptb.test.txt
mkdir -p "$OUT" "$M"
$B data fetch ptb
$B data fetch brown
if [ -z "${ONLY:-}" ]; then
cp "$SRC"/manifest.json "$SRC"/model.safetensors "$M"/
rm -rf "$M"/heads

# 1. Budget sweep, L2S and k-means only, r = 100 (one process: the contexts are shared).
$B train-head l2s --model "$M" --config experiments/configs/l2s.json,experiments/configs/kmeans.json \
    --budget 25,50,75,100,150,200,300 --name sweep --quiet 2> "$OUT/sweep-train.log"

# 2. Table 4: r = 50, 100, 200, 250 with r + B = 300 dot products per query.
for rb in 50:250 100:200 200:100 250:50; do
    r=${rb%%:*}; b=${rb##*:}
    $B train-head l2s --model "$M" --config experiments/configs/l2s.json --clusters "$r" \
        --budget "$b" --name "table4-r$r" --quiet 2> "$OUT/table4-r$r-train.log"
done

# 3. Every head against the full softmax on the whole PTB test set, one process, same contexts.
HEADS=$(ls "$M/heads" | paste -sd, -)
$B bench --model "$M" --text "$TEST" --heads "full,$HEADS" --max-contexts 100000 --repeats 5 \
    --json > "$OUT/bench-ptb-test.jsonl"
jq -c 'select(.head | startswith("sweep"))' "$OUT/bench-ptb-test.jsonl" > "$OUT/sweep.jsonl"
$B plot --input "$OUT/sweep.jsonl" --out "$OUT/precision-vs-speedup" \
    --title "PTB-Small test: L2S vs spherical k-means (r = 100, budget sweep)"

# 4. Table 6: perplexity with exact logits inside the candidate set, rank-20 SVD outside.
for h in sweep-l2s-r100-b50 sweep-l2s-r100-b100 sweep-l2s-r100-b200 sweep-kmeans-r100-b100 sweep-kmeans-r100-b200; do
    $B eval --model "$M" --text "$TEST" --head "$h" --fallback-rank 20 --json
done > "$OUT/table6.jsonl"

fi

# 4b. Table 6's other columns, on the shipped model and heads in one run: SVD-softmax (its
#     rank-20 preview for every word, exact logits for the best N), FGD (exact logits for the
#     words the graph search finds, rank-20 elsewhere), adaptive softmax (its own distribution:
#     the head level and the target's cluster) and the shipped L2S head (B = 200).
for h in l2s adaptive svd-r20-n500 svd-r20-n1000 svd-r20-n2000 hnsw-ef50 hnsw-ef100 hnsw-ef200; do
    $B eval --model "$SRC" --text "$TEST" --head "$h" --fallback-rank 20 --repeats 5 --json
done > "$OUT/table6-methods.jsonl"
[ -n "${ONLY:-}" ] && exit 0

# 5. Out of domain: the Brown corpus, which the LM and the heads never saw.
$B bench --model "$M" --text data/brown/brown.txt --heads "full,$HEADS" --max-contexts 100000 \
    --repeats 3 --json > "$OUT/bench-brown.jsonl"

{
    echo "git $(git rev-parse --short HEAD)$(git diff --quiet || echo '+dirty') · $(date -u +%F) ·" \
        "$(nproc) cores · $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
} > "$OUT/machine.txt"
python3 experiments/l2s_tables.py "$OUT" > "$OUT/tables.md"
echo "done: $OUT (the tables of results/l2s.md: $OUT/tables.md)"
