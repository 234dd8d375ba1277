# Sourced by nmt_marian_fast.sh and nmt_marian_tanaka.sh: one JSON row per system and
# configuration in $ROWS, ours and Marian's decoding the same test set in one run (beam 5,
# batches of 16, 1 thread), each with its BLEU against the references.
# Needs B (our binary), PYTHON, T (the test files' prefix), SRC and TGT (their suffixes),
# SCRATCH (where hypotheses and stats go), MD (Marian's folder), ROWS, and MARIAN_ARGS (an
# array of more nmt_marian_decode.py options: its model, languages, tokenizer); `torch` needs
# TORCH_PYTHON (a python with torch; default $PYTHON).

# fbgemm's 8-bit product for this CPU's widest vectors (its rows record the type in `options`).
PACKED8=packed8avx2
grep -qw avx512bw /proc/cpuinfo && PACKED8=packed8avx512

row() {  # row LABEL SYSTEM STATS HYP
  local bleu
  bleu=$($B bleu --ref "$T.$TGT" --hyp "$4" --json | python3 -c "import json,sys; print(json.load(sys.stdin)['score'])")
  python3 -c "import json; s=json.load(open('$3')); s.update(config='$1', system='$2', bleu=$bleu); print(json.dumps(s))" >> "$ROWS"
}

ours() {  # ours LABEL MODEL [translate options...]
  local label=$1 model=$2
  shift 2
  $B translate --model "$model" --input "$T.$SRC" --beam 5 --batch 16 "$@" \
    --output "$SCRATCH/hyp.$TGT" --stats "$SCRATCH/stats.json" 2>/dev/null
  row "$label" ours "$SCRATCH/stats.json" "$SCRATCH/hyp.$TGT"
}

marian() {  # marian LABEL [marian options...]
  local label=$1
  shift
  env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE $PYTHON experiments/peers/nmt_marian_decode.py \
    --dir "$MD" "${MARIAN_ARGS[@]}" --input "$T.$SRC" --beam 5 --batch 16 --extra "$*" \
    --output "$SCRATCH/hyp.$TGT" --stats "$SCRATCH/stats.json" 2>/dev/null
  row "$label" marian "$SCRATCH/stats.json" "$SCRATCH/hyp.$TGT"
}

torch_eager() {  # torch_eager LABEL MODEL: PyTorch eager decoding our f32 weights, one sentence at a time
  env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "${TORCH_PYTHON:-$PYTHON}" experiments/peers/nmt_torch.py \
    --model "$2" --input "$T.$SRC" --beam 5 --binary "$B" \
    --output "$SCRATCH/hyp.$TGT" --stats "$SCRATCH/stats.json" 2>/dev/null
  row "$1" pytorch-eager "$SCRATCH/stats.json" "$SCRATCH/hyp.$TGT"
}
