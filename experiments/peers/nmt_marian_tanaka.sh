#!/usr/bin/env bash
# Marian (PyPI `pymarian`, a CPU build of the Marian C++ engine) trained on the same Tanaka
# ja → en split as our students, on the same tokens: the Japanese cut into our translator's
# subwords (`fastsoftmax text tokenize --model`, the 8,000-piece BPE learnt from train.ja),
# the English into our word tokens. Its RNN `s2s` model in the tiny shape (bidirectional GRU
# encoder of 2 layers, conditional-GRU decoder, tied target embeddings, 256-wide embeddings,
# 512-wide states, dropout 0.3), Adam 1e-3, batches of 64 sentences, $THREADS CPU threads
# (default 2; our trainer keeps about one core busy, so 1 runs beside it at full speed), trained
# until its valid BLEU (Marian's own, on tokens, beam 5) has not risen for 3 validations of
# 2,000 updates each (6,000 updates, 2.7 epochs): to convergence, not a fixed budget. SIGTERM
# (a session's end) makes Marian save; running the script again continues from the saved model
# and optimizer.
#
# `decode` then times Marian's fastest forms against our student in one run, 1 thread, beam 5,
# batches of 16, on the 2,000 test sentences: f32, its lexical shortlist (from our aligner's
# links over the same tokens, `marian_shortlist.py`), its 8-bit products packed on the fly, both;
# ours f32 and int8 + the vocabulary map, and PyTorch eager on our f32 weights (batch 1: one
# sentence with its beams at a time; TORCH_PYTHON names a python with torch). Rows go to experiments/results/nmt-distill/marian.jsonl.
#
# STUDENT is our f32 student (rows f32, int8 + its map, PyTorch eager on the f32 weights) or,
# by default when runs/nmt35 does not hold it, the shipped int8 student `assets/models/ja-en-tiny`
# (rows int8 + its shipped map, int8 without the map, PyTorch eager on its int8 rows widened to
# f32): the decode stage then needs only Marian's model.
#
#   PYMARIAN=/path/to/pymarian bash experiments/peers/nmt_marian_tanaka.sh train [TOKENIZER_MODEL] [OUT]
#   PYTHON=/path/to/python [STUDENT=runs/nmt35/tanaka-distilled-tiny-lstm] \
#     bash experiments/peers/nmt_marian_tanaka.sh decode [TOKENIZER_MODEL] [OUT]
set -euo pipefail
cd "$(dirname "$0")/../.."
STAGE=${1:-train}
# TOKENIZER_MODEL: a translator whose src.subwords.json cuts the Japanese. train-nmt learns the
# BPE from train.ja alone, deterministically, so the shipped student's is the teacher's; decode
# also builds the shortlist's links with its vocabularies, the teacher's by default
# (runs/nmt35/* come from `bash experiments/nmt_distill.sh train tanaka`), else the shipped
# student's, which is the same BPE.
TOK=${2:-assets/models/ja-en-tiny}
if [ "$STAGE" = decode ] && [ -z "${2:-}" ] && [ -d runs/nmt35/tanaka-teacher ]; then TOK=runs/nmt35/tanaka-teacher; fi
OUT=${3:-runs/marian-tanaka}
PYMARIAN=${PYMARIAN:-pymarian}
THREADS=${THREADS:-2}
PYTHON=${PYTHON:-python3}
B=./target/release/fastsoftmax
cargo build --release
$B data fetch tanaka --from "${FROM:-../shared/data/ja}"
[ -f "$TOK/src.subwords.json" ] || {
  echo "no $TOK/src.subwords.json: name a Tanaka translator as TOKENIZER_MODEL (runs/nmt35/* come from bash experiments/nmt_distill.sh train tanaka)" >&2
  exit 1
}
mkdir -p "$OUT"

if [ "$STAGE" = decode ]; then
  SHIPPED=assets/models/ja-en-tiny
  STUDENT=${STUDENT:-runs/nmt35/tanaka-distilled-tiny-lstm}
  [ -d "$STUDENT" ] || [ "$STUDENT" != runs/nmt35/tanaka-distilled-tiny-lstm ] || STUDENT=$SHIPPED
  DISTILLED=${DISTILLED:-runs/nmt35/tanaka-distilled}
  [ -f "$STUDENT/manifest.json" ] || { echo "no translator in $STUDENT: name our student as STUDENT (bash experiments/nmt_distill.sh train tanaka trains it)" >&2; exit 1; }
  RES=experiments/results/nmt-distill
  T=data/tanaka/test
  mkdir -p "$RES"
  [ -f "$OUT/model.npz" ] || { echo "no Marian model in $OUT: run this script's train stage" >&2; exit 1; }
  [ -f "$OUT/train.links" ] || $B build-vmap --model "$TOK" --data data/tanaka --src ja --tgt en \
    --out "$OUT/marian.vmap" --links-out "$OUT/train.links" --eval none >/dev/null
  [ -f "$OUT/lex.s2t" ] || $PYTHON experiments/peers/marian_shortlist.py --src "$OUT/train.ja" \
    --tgt "$OUT/train.en" --links "$OUT/train.links" --out "$OUT/lex.s2t"
  precision=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1])).get('precision', 'f32'))" "$STUDENT/manifest.json")
  if [ "$precision" = f32 ]; then
    [ -d "$STUDENT-int8" ] || $B quantize --model "$STUDENT" --to int8 --out "$STUDENT-int8"
    # A distilled student's map comes from the teacher's translations it trained on.
    distilled=()
    case $STUDENT in *distilled*) distilled=(--distilled "$DISTILLED") ;; esac
    [ -f "$STUDENT.vmap" ] || $B build-vmap --model "$STUDENT" --data data/tanaka --src ja --tgt en \
      "${distilled[@]}" --out "$STUDENT.vmap"
  elif [ ! -f "$STUDENT/vocab.map.gz" ]; then
    echo "$STUDENT is $precision without a shipped map: name the f32 student as STUDENT" >&2
    exit 1
  fi
  ROWS=$RES/marian.jsonl
  : > "$ROWS"
  SRC=ja TGT=en SCRATCH=$OUT MD=$OUT
  MARIAN_ARGS=(--model model.npz.best-bleu.npz --src ja --tgt en --src-tokenizer "$TOK")
  . experiments/peers/marian_rows.sh
  if [ "$precision" = f32 ]; then
    ours f32 "$STUDENT"
    ours int8+vmap "$STUDENT-int8" --vmap "$STUDENT.vmap"
    torch_eager f32 "$STUDENT"
  else
    ours "$precision (shipped)" "$STUDENT" --no-vmap
    ours "$precision+vmap (shipped)" "$STUDENT"
    torch_eager "$precision rows widened to f32 (shipped)" "$STUDENT"
  fi
  marian f32
  marian "shortlist 100 100" --shortlist "$OUT/lex.s2t" 100 100
  marian "shortlist 50 50" --shortlist "$OUT/lex.s2t" 50 50
  marian packed8 --gemm-type $PACKED8
  marian "packed8 + shortlist 100 100" --gemm-type $PACKED8 --shortlist "$OUT/lex.s2t" 100 100
  marian "packed8 + shortlist 50 50" --gemm-type $PACKED8 --shortlist "$OUT/lex.s2t" 50 50
  rm -f "$OUT/stats.json" "$OUT/hyp.en"
  exit 0
fi

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
  --cpu-threads "$THREADS" --workspace 4096 --seed 1 \
  --valid-sets "$OUT/valid.ja" "$OUT/valid.en" --valid-metrics bleu cross-entropy \
  --valid-freq 2000u --save-freq 500u --overwrite --disp-freq 500u --early-stopping 3 \
  --beam-size 5 --normalize 1 --valid-mini-batch 64 --keep-best \
  --log "$OUT/train.log" --valid-log "$OUT/valid.log" || true
ls -la "$OUT"
