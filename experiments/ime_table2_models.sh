#!/usr/bin/env bash
# The models of Table 2's self-normalisation and D-softmax rows (experiments/results/ime.md),
# rebuilt from git alone: issue 19's converter LSTM as 779bc84 ships it (int8 rows, widened to
# f32 on load), without its lexicon and unigram shift, as a `train-lm` folder; and that LSTM
# fine-tuned on KWDLC train with self-normalisation, 3 epochs at α 0.1, then 2 more at α 1
# (`train-lm --init` reads the folder's weights). About 20 minutes on two cores.
#
#   bash experiments/ime_table2_models.sh
#   MODEL_REV=779bc84 bash experiments/ime_table2.sh "" runs/ime36/sn-779bc84 \
#     runs/ime36/lstm-779bc84 runs/ime36/sn1-779bc84      # trains the two heads when missing
set -euo pipefail
cd "$(dirname "$0")/.."
REV=${REV:-779bc84}
OUT=${OUT:-runs/ime36}
cargo build --release
B=./target/release/fastsoftmax
[ -f data/ja/kwdlc-train.txt ] || $B data fetch ja --from "${JA_FROM:-../shared/data/ja}"
LSTM=$OUT/lstm-$REV
if [ ! -f "$LSTM/manifest.json" ]; then
  tmp=$(mktemp -d)
  git archive "$REV" assets/models/ime-ja | tar -x -C "$tmp" --strip-components=3
  mkdir -p "$LSTM"
  for f in manifest.json model.safetensors config.json train.log metrics.json command.txt; do
    [ -f "$tmp/$f" ] && cp "$tmp/$f" "$LSTM/"
  done
  rm -rf "$tmp"
fi
tune() { # config, init, out
  [ -f "$3/metrics.json" ] || $B train-lm --config "$1" --init "$2" --train data/ja/kwdlc-train.txt \
    --valid data/ja/valid.txt --test data/ja/test.txt --out "$3" --quiet
}
tune experiments/configs/ime-lstm-tune-selfnorm.json "$LSTM" "$OUT/sn-$REV"
tune experiments/configs/ime-lstm-tune-selfnorm1.json "$OUT/sn-$REV" "$OUT/sn1-$REV"
