#!/usr/bin/env bash
# Large-vocabulary training: full softmax against sampled softmax (Jean et al. 2015, log-Q
# correction) on the Brown corpus (vocabulary = every word seen ≥ 2 times in training, 23,435
# words), the same 2×200 LSTM and recipe, each trained for the same wall-clock budget; exact
# full-softmax test perplexity at the end. Speed per token comes from the same runs' train.log.
#
#   bash experiments/large_vocab.sh [BUDGET_MINUTES]      # default 8
set -euo pipefail
cd "$(dirname "$0")/.."
BUDGET=${1:-8}
OUT=experiments/results/large-vocab
mkdir -p "$OUT" runs/large-vocab
cargo build --release
B=./target/release/fastsoftmax
$B data fetch brown
for kind in full sampled; do
  rm -rf "runs/large-vocab/$kind"
  $B train-lm --config "experiments/configs/brown-lstm-$kind.json" \
    --train data/brown/brown.train.txt --valid data/brown/brown.valid.txt --test data/brown/brown.test.txt \
    --out "runs/large-vocab/$kind" --budget-minutes "$BUDGET" --quiet 2>&1 | tee "$OUT/$kind.log"
  cp "runs/large-vocab/$kind/metrics.json" "$OUT/$kind.metrics.json"
  cp "runs/large-vocab/$kind/train.log" "$OUT/$kind.train.log"
done
python3 - "$OUT" <<'PY'
import json, sys, statistics
out = sys.argv[1]
rows = {}
for kind in ("full", "sampled"):
    m = json.load(open(f"{out}/{kind}.metrics.json"))
    eps = m["epochs"]
    tokens = sum(e["tokens_per_s"] * e["seconds"] for e in eps)
    seconds = sum(e["seconds"] for e in eps)
    rows[kind] = dict(tok_s=tokens / seconds, epochs=len(eps), train_s=seconds, test=m["test_ppl"], valid=m["valid_ppl"])
for k, r in rows.items():
    print(f"{k:8} {r['tok_s']:8.0f} tok/s  {r['epochs']:3d} epochs in {r['train_s']:.0f} s  valid {r['valid']:.2f}  test {r['test']:.2f}")
f, s = rows["full"], rows["sampled"]
print(f"speed-up per token {s['tok_s'] / f['tok_s']:.2f}x; test perplexity sampled/full {s['test'] / f['test']:.3f}")
json.dump(rows, open(f"{out}/summary.json", "w"), indent=2)
PY
