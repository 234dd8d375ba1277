#!/usr/bin/env bash
# Training speed, ours against the PyTorch peer, side by side in one session: the PTB-Small
# LSTM and GRU recipes (experiments/configs/ptb-small-{lstm,gru}.json), the first N windows of an
# epoch (35 × 20 tokens each), tokens/s of training (validation outside the clock). Ours with the
# default threads, PyTorch with 1 and 2. Then the full PTB-Small LSTM recipe with the fused ops
# (7 epochs, ~10 min of training on 2 cores): tokens/s per epoch and perplexity, against the
# shipped model's (FULL_RECIPE=0 skips it). Raw rows and logs go to
# experiments/results/training-speed/; experiments/results/training-speed.md discusses them.
#
#   PYTHON=python3 bash experiments/training_speed.sh [WINDOWS] [ROUNDS]   # needs torch, threadpoolctl
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-150}
ROUNDS=${2:-2}
PYTHON=${PYTHON:-python3}
OUT=experiments/results/training-speed
mkdir -p "$OUT" runs/speed
cargo build --release
B=./target/release/fastsoftmax
$B data fetch ptb
: > "$OUT/rows.jsonl"
for round in $(seq "$ROUNDS"); do
  for cell in lstm gru; do
    python3 -c "import json,sys; c=json.load(open('experiments/configs/ptb-small-$cell.json')); c['train']['epochs']=1; json.dump(c,open('runs/speed/$cell.json','w'))"
    rm -rf "runs/speed/$cell"
    /usr/bin/time -f '%e %U %S' -o runs/speed/time.txt \
      $B train-lm --config "runs/speed/$cell.json" --out "runs/speed/$cell" --max-windows "$N" --quiet 2> runs/speed/ours.log
    read -r wall user sys < runs/speed/time.txt
    tok=$(grep -o '[0-9]* tok/s' "runs/speed/$cell/train.log" | tail -1 | cut -d' ' -f1)
    echo "{\"system\": \"fastsoftmax\", \"cell\": \"$cell\", \"round\": $round, \"windows\": $N, \"tokens_per_s\": $tok, \"process_wall_s\": $wall, \"process_cpu_s\": $(echo "$user + $sys" | bc)}" >> "$OUT/rows.jsonl"
    for threads in 1 2; do
      $PYTHON experiments/peers/train_lm_torch.py --config "runs/speed/$cell.json" --threads $threads \
        --max-windows "$N" --epochs 1 --no-valid --json \
        | sed "s/^{/{\"system\": \"pytorch\", \"cell\": \"$cell\", \"round\": $round, /" >> "$OUT/rows.jsonl"
    done
  done
done
$PYTHON - "$OUT/rows.jsonl" <<'PY'
import json, sys, statistics, collections
rows = [json.loads(l) for l in open(sys.argv[1])]
by = collections.defaultdict(list)
for r in rows:
    by[(r["cell"], r["system"], r.get("threads", "default"))].append(r["tokens_per_s"])
for (cell, system, threads), v in sorted(by.items()):
    print(f"{cell:5} {system:12} threads {threads!s:8} median {statistics.median(v):8.0f} tok/s  ({', '.join(f'{x:.0f}' for x in v)})")
PY
# The full recipe, as training-speed.md's last section ran it (its metrics and train.log kept).
if [ "${FULL_RECIPE:-1}" = 1 ]; then
  rm -rf runs/ptb-fused
  $B train-lm --config experiments/configs/ptb-small-lstm.json --data data/ptb --out runs/ptb-fused --quiet
  cp runs/ptb-fused/metrics.json "$OUT/ptb-small-lstm-fused.metrics.json"
  cp runs/ptb-fused/train.log "$OUT/ptb-small-lstm-fused.train.log"
fi
