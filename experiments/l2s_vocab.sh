#!/usr/bin/env bash
# The L2S paper's Figure 8: speedup against vocabulary size (issue 36 item 8). As the paper does,
# PTB-Small is shrunk to its 2,000 … 8,000 most frequent words (the others read as <unk>;
# `train.max_vocab`) and each LM is trained with the shipped LSTM's recipe; the 10,000-word point
# is the shipped model. Each gets L2S heads of r = 200 clusters (the paper's setting) over a
# sweep of budgets; a point is the cheapest budget whose test P@1 reaches 0.99 (the paper picks
# P@1 ≈ 0.99). experiments/results/l2s.md discusses the result.
#
#   bash experiments/l2s_vocab.sh           # ~1.5 h on one core: LMs, heads, benches, figure
#   bash experiments/l2s_vocab.sh train     # LMs and heads only (resumable; THREADS=1 beside other work)
#   bash experiments/l2s_vocab.sh bench     # benches, rows and figure (run it on an idle core)
set -euo pipefail
cd "$(dirname "$0")/.."

STAGE=${1:-all}
RUNS=${RUNS:-runs/l2s-vocab}
THREADS=${THREADS:-2}
OUT=experiments/results/l2s
VOCABS=${VOCABS:-"2000 4000 6000 8000 10000"}
BUDGETS=${BUDGETS:-50,75,100,150}
cargo build --release
B=./target/release/fastsoftmax
mkdir -p "$RUNS" "$OUT"
$B data fetch ptb

if [ "$STAGE" != bench ]; then
  for v in $VOCABS; do
    m=$RUNS/ptb-v$v
    if [ "$v" = 10000 ]; then
      mkdir -p "$m"
      cp assets/models/ptb-small-lstm/{manifest.json,model.safetensors,metrics.json} "$m"/
    elif [ ! -f "$m/metrics.json" ]; then
      jq ".train.max_vocab = $v" experiments/configs/ptb-small-lstm.json > "$RUNS/ptb-v$v.json"
      resume=()
      if [ -f "$m/train_state.json" ]; then resume=(--resume); fi
      $B train-lm --config "$RUNS/ptb-v$v.json" --data data/ptb --out "$m" --threads "$THREADS" \
        --quiet "${resume[@]}"
    fi
    if [ ! -d "$m/heads/f8-r200-b50" ]; then
      $B train-head l2s --model "$m" --config experiments/configs/l2s.json --clusters 200 \
        --budget "$BUDGETS" --name f8 --quiet 2> "$RUNS/heads-v$v.log"
    fi
  done
fi

if [ "$STAGE" != train ]; then
  for v in $VOCABS; do
    m=$RUNS/ptb-v$v
    heads=$(ls "$m/heads" | grep '^f8-' | paste -sd, -)
    $B bench --model "$m" --text data/ptb/ptb.test.txt --heads "full,$heads" \
      --max-contexts 100000 --repeats 3 --json | jq -c ". + {vocab: $v}"
  done > "$OUT/figure8-bench.jsonl"
  # A point per vocabulary: the cheapest budget (fewest FLOPs) with P@1 ≥ 0.99, and the full
  # softmax's test accuracy beside it.
  jq -s -c 'group_by(.vocab)[] as $g
    | ($g | map(select(.head == "full"))[0]) as $full
    | ($g | map(select(.head != "full" and .p_at_1 >= 0.99)) | max_by(.flop_speedup))
    | {vocab, head, method: "L2S (r = 200)", p_at_1, p_at_5, speedup_b1, speedup_b64,
       flop_speedup, us_full_b1: $full.us_per_query_b1, acc_at_1_full: $full.acc_at_1}' \
    "$OUT/figure8-bench.jsonl" > "$OUT/figure8.jsonl"
  $B plot --input "$OUT/figure8.jsonl" --x vocab --y speedup_b1,flop_speedup --series method \
    --out "$OUT/figure8" --title "PTB-Small shrunk to V words: L2S speedup at P@1 ≥ 0.99"
  echo "git $(git rev-parse --short HEAD)$(git diff --quiet || echo '+dirty') · $(date -u +%F) ·" \
    "$(nproc) cores · $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)" \
    > "$OUT/figure8-machine.txt"
  cat "$OUT/figure8.jsonl"
fi
