#!/usr/bin/env bash
# Fast translation (issue 17), against our own f32 full-softmax engine on John (879 verses),
# 1 thread, rounds interleaved so every configuration sees the same machine load:
# - Table 1 of the OpenNMT WNMT-2018 paper for our vocabulary maps: longest n-gram, minimum
#   count, words per n-gram → coverage of the test references' tokens, candidates per token,
#   file size, output-layer time, BLEU (beam 5, batch 16);
# - Table 3: f32 full softmax, int8 and int16 (`quantize`), the map (per-sentence and per-batch
#   shortlists) and each precision with the map, beam 1 and 5, decode time and BLEU;
# - Figure 3: words/s against the batch size at beam 5 and against the beam at batch 16, with
#   and without the map;
# - L2S and DS-Softmax heads in the beam (trained on the decoder's contexts by `train-head`
#   into a copy of the model under runs/ when missing: DS takes ~20 min on 2 cores).
# Raw rows go to experiments/results/nmt-fast/; experiments/results/nmt-fast.md discusses them.
#
#   bash experiments/nmt_fast.sh [MODEL] [ROUNDS]   # MODEL: the f32 translator (default: the
#                                                   # shipped one's f32 weights, bible_f32.sh)
#   ONLY=shipped bash experiments/nmt_fast.sh       # the shipped int8 folder's rows alone
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL=${1:-$(bash experiments/bible_f32.sh)}  # the f32 model the results were measured on
ROUNDS=${2:-3}
OUT=experiments/results/nmt-fast
mkdir -p "$OUT"
cargo build --release
B=./target/release/fastsoftmax
$B data fetch bible
T=data/bible/test
# One decode: appends its stats, BLEU and labels to $ROWS (rows.jsonl).
run() {  # run LABEL ROUND BEAM BATCH [translate options...]
  local label=$1 round=$2 beam=$3 batch=$4
  shift 4
  $B translate --model "$MODEL" --input $T.en --beam "$beam" --batch "$batch" "$@" \
    --output "$OUT/hyp.de" --stats "$OUT/stats.json" 2>/dev/null
  local bleu
  bleu=$($B bleu --ref $T.de --hyp "$OUT/hyp.de" --json | python3 -c "import json,sys; print(json.load(sys.stdin)['score'])")
  python3 -c "import json; s=json.load(open('$OUT/stats.json')); s.update(config='$label', round=$round, bleu=$bleu); print(json.dumps(s))" >> "$OUT/${ROWS:-rows.jsonl}"
}

# The shipped folder as an app gets it (int8 with the map inside; its L2S head in place of the
# map; --no-vmap, every word), beams 5 and 1, batch 16: nmt-fast/shipped.jsonl.
shipped() {
  : > "$OUT/shipped.jsonl"
  local serve args
  for serve in map l2s all; do
    case $serve in map) args=() ;; l2s) args=(--head l2s) ;; all) args=(--no-vmap) ;; esac
    for beam in 5 1; do
      MODEL=assets/models/bible-en-de-tiny ROWS=shipped.jsonl run "shipped $serve" 1 $beam 16 "${args[@]}"
    done
  done
  rm -f "$OUT/stats.json" "$OUT/hyp.de"
}
if [ "${ONLY:-}" = shipped ]; then shipped; exit 0; fi
# Screening heads, trained for this model on teacher-forced decoder contexts of the training
# split (the copy keeps the heads out of assets/; its weights are the model's).
HM=${HEADS_MODEL:-runs/bible-heads}
[ -f "$HM/manifest.json" ] && cmp -s "$HM/model.safetensors" "$MODEL/model.safetensors" || {
  rm -rf "$HM"; mkdir -p "$(dirname "$HM")"; cp -r "$MODEL" "$HM"; }
# The translator's L2S head trains without the budget term (γ 0, results/l2s-rounds.md): with it
# every learned round lost to k-means on decoder contexts.
# A copied or earlier L2S head is kept only if it was trained with that config.
python3 -c 'import json, sys; a, b = (json.load(open(f)) for f in sys.argv[1:]); sys.exit(a != b)' \
  "$HM/heads/l2s/config.json" experiments/configs/l2s-nmt.json 2>/dev/null || {
  rm -rf "$HM/heads/l2s"
  $B train-head l2s --model "$HM" --config experiments/configs/l2s-nmt.json --name l2s --quiet; }
[ -d "$HM/heads/ds" ] || $B train-head ds --model "$HM" --config experiments/configs/ds.json --max-contexts 300000 --quiet
cp "$HM/heads/l2s/head.json" "$OUT/head-l2s.json"
cp "$HM/heads/ds/head.json" "$OUT/head-ds.json"

INT8=$OUT/int8-model
INT16=$OUT/int16-model
$B quantize --model "$HM" --out "$INT8" >/dev/null  # carries the heads over
$B quantize --model "$MODEL" --to int16 --out "$INT16" >/dev/null

# Table 1's maps, all from one alignment of the training split: nX maps count the target words
# linked to an X-gram's words, pX maps the target phrases aligned to it (the paper's phrase
# table). BEST serves Table 3 and the figures (the fastest map of Table 1 that keeps BLEU, see
# results/nmt-fast.md).
MAPS="n1-f2-N20 n2-f2-N10 n2-f2-N20 n2-f1-N20 n2-f2-N50 n3-f2-N20 p1-f2-N20 p2-f2-N20 p2-f2-N50 p3-f1-N20"
BEST=${BEST:-n2-f2-N10}
[ -f "$OUT/train.links" ] || $B build-vmap --out "$OUT/$BEST.vmap" --links-out "$OUT/train.links" >/dev/null
: > "$OUT/maps.jsonl"
for m in $MAPS; do
  IFS=- read -r n f N <<< "$m"
  unit=words; [ "${n:0:1}" = p ] && unit=phrases
  $B build-vmap --links "$OUT/train.links" --out "$OUT/$m.vmap" --max-ngram "${n:1}" --unit $unit \
    --min-freq "${f#f}" --per-ngram "${N#N}" --json | python3 -c "import json,sys; r=json.load(sys.stdin); r['map']='$m'; print(json.dumps(r))" >> "$OUT/maps.jsonl"
done

: > "$OUT/rows.jsonl"
for round in $(seq "$ROUNDS"); do
  echo "round $round/$ROUNDS" >&2
  for beam in 5 1; do
    run f32 "$round" $beam 16
    run vmap "$round" $beam 16 --vmap "$OUT/$BEST.vmap"
    run vmap-batch "$round" $beam 16 --vmap "$OUT/$BEST.vmap" --vmap-scope batch
    MODEL=$INT8 run int8 "$round" $beam 16
    MODEL=$INT16 run int16 "$round" $beam 16
    MODEL=$INT16 run int16+vmap "$round" $beam 16 --vmap "$OUT/$BEST.vmap"
    MODEL=$INT8 run int8+vmap "$round" $beam 16 --vmap "$OUT/$BEST.vmap"
    MODEL=$HM run l2s "$round" $beam 16 --head l2s
    MODEL=$HM run ds "$round" $beam 16 --head ds
    MODEL=$INT8 run int8+l2s "$round" $beam 16 --head l2s
  done
  for m in $MAPS; do
    [ "$m" = "$BEST" ] || run "table1 $m" "$round" 5 16 --vmap "$OUT/$m.vmap"
  done
  # Figure 3's other beams (batch 16).
  for beam in 2 3 4; do
    run f32 "$round" $beam 16
    run vmap "$round" $beam 16 --vmap "$OUT/$BEST.vmap"
    MODEL=$INT8 run int8+vmap "$round" $beam 16 --vmap "$OUT/$BEST.vmap"
  done
  for batch in 1 4 64; do
    run f32 "$round" 5 $batch
    run vmap "$round" 5 $batch --vmap "$OUT/$BEST.vmap"
    run vmap-batch "$round" 5 $batch --vmap "$OUT/$BEST.vmap" --vmap-scope batch
    MODEL=$INT8 run int8+vmap "$round" 5 $batch --vmap "$OUT/$BEST.vmap"
  done
done
shipped
rm -rf "$OUT/stats.json" "$OUT/hyp.de" "$INT8" "$INT16"
python3 experiments/nmt_fast_tables.py "$OUT" | tee "$OUT/summary.md"
