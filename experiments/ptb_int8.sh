#!/usr/bin/env bash
# int8 for the language-model heads on PTB (experiments/results/nmt-fast.md, "int8 for the
# language-model heads"): the full softmax scanned on the int8 output layer with its best M
# re-scored in f32 (full-int8-mM), and the shipped L2S head in f32 and in int8 (l2s+int8),
# against the f32 full head in the same bench run: 20,000 test contexts, medians of 5 passes,
# one thread. Rows go to experiments/results/nmt-fast/ptb-int8.jsonl, the table to stdout.
#
#   bash experiments/ptb_int8.sh     # a few minutes; run it on an otherwise idle machine
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release
B=./target/release/fastsoftmax
OUT=experiments/results/nmt-fast
mkdir -p "$OUT"
$B data fetch ptb
# `full` is listed so that its own row (the baseline's µs per query) is saved too.
$B bench --model "$(bash experiments/f32_model.sh ptb-small-lstm)" --text data/ptb/ptb.test.txt \
  --heads full,full-int8-m10,full-int8-m20,full-int8-m50,l2s,l2s+int8 \
  --max-contexts 20000 --repeats 5 --json > "$OUT/ptb-int8.jsonl" 2> "$OUT/ptb-int8.log"
python3 - "$OUT/ptb-int8.jsonl" <<'PY'
import json, sys
print("| head | P@1 | P@5 | µs/q batch 1 | µs/q batch 64 | vs full, batch 1 | vs full, batch 64 |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
for r in map(json.loads, open(sys.argv[1])):
    print(f"| {r['head']} | {r['p_at_1']:.4f} | {r['p_at_5']:.4f} | {r['us_per_query_b1']:.1f} | "
          f"{r['us_per_query_b64']:.1f} | {r['speedup_b1']:.2f}× | {r['speedup_b64']:.2f}× |")
PY
