#!/usr/bin/env bash
# Marian (PyPI `pymarian`, a CPU build of the Marian C++ engine) trained on the same tokenized
# Bible split as our translator: its RNN `s2s` model (bidirectional GRU encoder of 2 layers,
# conditional-GRU decoder with attention, tied target embeddings, 256-wide embeddings, 512-wide
# states: the closest Marian has to our tiny shape), Adam 1e-3, batches of 64 sentences, 2 CPU
# threads, for the same wall-clock budget as ours (SIGTERM makes Marian save and exit).
#
#   PYMARIAN=/path/to/pymarian bash experiments/peers/nmt_marian.sh [MINUTES] [OUT]
set -euo pipefail
cd "$(dirname "$0")/../.."
MINUTES=${1:-85}
OUT=${2:-runs/marian}
PYMARIAN=${PYMARIAN:-pymarian}
B=./target/release/fastsoftmax
cargo build --release
$B data fetch bible
mkdir -p "$OUT"
for p in train valid test; do
  for l in en de; do
    $B text tokenize < "data/bible/$p.$l" > "$OUT/$p.$l"
  done
done
timeout --signal=TERM "${MINUTES}m" "$PYMARIAN" --type s2s --model "$OUT/model.npz" \
  --train-sets "$OUT/train.en" "$OUT/train.de" --vocabs "$OUT/vocab.en.yml" "$OUT/vocab.de.yml" \
  --dim-vocabs 10000 20000 --dim-emb 256 --dim-rnn 512 \
  --enc-type bidirectional --enc-cell gru --enc-depth 2 --dec-cell gru --dec-depth 1 \
  --tied-embeddings --dropout-rnn 0.3 --max-length 100 \
  --optimizer adam --learn-rate 0.001 --clip-norm 5 --mini-batch 64 --maxi-batch 100 \
  --cpu-threads 2 --workspace 4096 --seed 1 \
  --valid-sets "$OUT/valid.en" "$OUT/valid.de" --valid-metrics cross-entropy perplexity \
  --valid-freq 1000u --save-freq 1000u --disp-freq 100u --early-stopping 100 \
  --log "$OUT/train.log" --valid-log "$OUT/valid.log" || true
ls -la "$OUT"
