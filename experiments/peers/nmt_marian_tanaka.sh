#!/usr/bin/env bash
# Marian (PyPI `pymarian`, a CPU build of the Marian C++ engine) trained on the same Tanaka
# ja → en split as our students, on the same tokens: the Japanese cut into our translator's
# subwords (`fastsoftmax text tokenize --model`, the 8,000-piece BPE learnt from train.ja),
# the English into our word tokens. Its RNN `s2s` model in the tiny shape (bidirectional GRU
# encoder of 2 layers, conditional-GRU decoder, tied target embeddings, 256-wide embeddings,
# 512-wide states, dropout 0.3), Adam 1e-3, batches of 64 sentences, 2 CPU threads, trained
# until its valid BLEU (Marian's own, on tokens, beam 5) has not risen for 5 validations of
# 2,000 updates each: to convergence, not a fixed budget. SIGTERM (a session's end) makes
# Marian save; running the script again continues from the saved model and optimizer.
#
#   PYMARIAN=/path/to/pymarian bash experiments/peers/nmt_marian_tanaka.sh [TOKENIZER_MODEL] [OUT]
set -euo pipefail
cd "$(dirname "$0")/../.."
TOK=${1:-runs/nmt35/tanaka-direct}
OUT=${2:-runs/marian-tanaka}
PYMARIAN=${PYMARIAN:-pymarian}
B=./target/release/fastsoftmax
mkdir -p "$OUT"
for p in train valid test; do
  [ -f "$OUT/$p.ja" ] || $B text tokenize --model "$TOK" < "data/tanaka/$p.ja" > "$OUT/$p.ja"
  [ -f "$OUT/$p.en" ] || $B text tokenize < "data/tanaka/$p.en" > "$OUT/$p.en"
done
"$PYMARIAN" --type s2s --model "$OUT/model.npz" \
  --train-sets "$OUT/train.ja" "$OUT/train.en" --vocabs "$OUT/vocab.ja.yml" "$OUT/vocab.en.yml" \
  --dim-vocabs 8000 16000 --dim-emb 256 --dim-rnn 512 \
  --enc-type bidirectional --enc-cell gru --enc-depth 2 --dec-cell gru --dec-depth 1 \
  --tied-embeddings --dropout-rnn 0.3 --max-length 60 \
  --optimizer adam --learn-rate 0.001 --clip-norm 5 --mini-batch 64 --maxi-batch 100 \
  --cpu-threads 2 --workspace 4096 --seed 1 \
  --valid-sets "$OUT/valid.ja" "$OUT/valid.en" --valid-metrics bleu cross-entropy \
  --valid-freq 2000u --save-freq 2000u --disp-freq 500u --early-stopping 5 \
  --beam-size 5 --normalize 1 --valid-mini-batch 32 --keep-best \
  --log "$OUT/train.log" --valid-log "$OUT/valid.log" || true
ls -la "$OUT"
