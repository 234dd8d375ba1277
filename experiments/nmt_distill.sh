#!/usr/bin/env bash
# Issue 35: sequence-level distillation (Kim & Rush 2016) on both pairs, as the OpenNMT
# WNMT-2018 system trains its students: a Transformer teacher, its beam-5 translations of the
# training source, and the tiny GRU trained on the references (direct) and on the teacher's
# translations (distilled) with the same recipe and budget.
#
#   bash experiments/nmt_distill.sh train [tanaka|bible]   # every model, resuming what started
#   bash experiments/nmt_distill.sh eval [tanaka|bible]    # rows, figures and tables
#
# Each step is a no-op once done (a finished run has metrics.json, a distillation
# distill.json) and resumes from its last epoch or chunk otherwise, so the script can be run
# again after a session ends. Runs go to $RUNS (default runs/nmt35).
set -euo pipefail
cd "$(dirname "$0")/.."
STAGE=${1:-train}
PAIRS=${2:-"tanaka bible"}
RUNS=${RUNS:-runs/nmt35}
FROM=${FROM:-../shared/data/ja}
B=./target/release/fastsoftmax
cargo build --release
mkdir -p "$RUNS"

# train CONFIG DATA SRC TGT OUT [ARGS…]: train-nmt, resumed when OUT holds a started run
# (one a session's end or a --budget-minutes stopped), skipped once every epoch is done.
# BUDGET=MINUTES passes --budget-minutes to the teachers (a session's time: no epoch starts
# that the last one's time says would not fit, and the next run resumes after it); every
# run trains whole epochs, so that direct and distilled students get the same budget.
# finished OUT: every epoch of the run in OUT is done (a run without a state is finished when
# it has its metrics).
finished() {
  if [ -f "$1/train_state.json" ]; then
    python3 -c "import json,sys; s=json.load(open('$1/train_state.json')); sys.exit(s['epochs_done'] < s['config']['train']['epochs'])"
  else
    [ -f "$1/metrics.json" ]
  fi
}

train() {
  local config=$1 data=$2 src=$3 tgt=$4 out=$5
  shift 5
  local resume=()
  if finished "$out"; then return; fi
  if [ -f "$out/train_state.json" ]; then resume=(--resume); fi
  if [ -n "${TEACHER_BUDGET:-}" ]; then resume+=(--budget-minutes "$TEACHER_BUDGET"); fi
  $B train-nmt --config "$config" --data "$data" --src "$src" --tgt "$tgt" --out "$out" \
    --quiet "${resume[@]}" "$@" 2>&1 | tee -a "$out.log"
}

pair() {
  case $1 in
    tanaka) echo "data/tanaka ja en experiments/configs/tanaka-transformer.json experiments/configs/tanaka-tiny.json" ;;
    bible) echo "data/bible en de experiments/configs/bible-transformer.json experiments/configs/bible-tiny-ls.json" ;;
  esac
}

$B data fetch tanaka --from "$FROM"
$B data fetch bible

if [ "$STAGE" = train ]; then
  for p in $PAIRS; do
    read -r data src tgt teacher student <<<"$(pair "$p")"
    TEACHER_BUDGET=${BUDGET:-} train "$teacher" "$data" "$src" "$tgt" "$RUNS/$p-teacher"
    if ! finished "$RUNS/$p-teacher"; then
      echo "the $p teacher has epochs to go: run this script again to resume it" >&2
      continue
    fi
    $B distill --teacher "$RUNS/$p-teacher" --data "$data" --src "$src" --tgt "$tgt" \
      --out "$RUNS/$p-distilled" --beam 5 --quiet
    # The Bible's direct student is trained again rather than taken from the shipped model:
    # that one was trained while batches fed the source's <eos> id as the decoder's first
    # input (fixed in NmtBatch::new), so it would not be the same code as the distilled one.
    # Students train two at a time, one thread each: train-nmt keeps about one of the two
    # cores busy (its products are too small to split well), so a pair takes about the time
    # of one run. Direct and distilled share the setting, so they share the budget too.
    # The queue keeps both cores busy: a finished (or resumed-short) run frees its slot for
    # the next. Tanaka adds Figure 1's other shapes: the tiny shape with LSTM cells
    # (distilled, and direct: it is far ahead of the GRU), and a micro GRU (128-wide
    # embeddings, 256-wide states), distilled.
    students=("$student $p-direct" "$student $p-distilled-tiny distilled")
    if [ "$p" = tanaka ]; then
      students+=("experiments/configs/tanaka-tiny-lstm.json $p-distilled-tiny-lstm distilled"
        "experiments/configs/tanaka-micro.json $p-distilled-micro distilled"
        "experiments/configs/tanaka-tiny-lstm.json $p-direct-tiny-lstm")
    fi
    for s in "${students[@]}"; do
      read -r config name how <<<"$s"
      args=(--threads 1)
      [ -z "$how" ] || args+=(--distilled "$RUNS/$p-distilled")
      if finished "$RUNS/$name"; then continue; fi
      while [ "$(jobs -rp | wc -l)" -ge 2 ]; do wait -n || true; done
      train "$config" "$data" "$src" "$tgt" "$RUNS/$name" "${args[@]}" &
    done
    wait
  done
fi

# evaluate PAIR NAME MODEL BEAMS BATCHES [translate ARGS…]: test BLEU and words/s (1 thread)
# of MODEL at every beam × batch, one JSON row each in $ROWS.
evaluate() {
  local p=$1 name=$2 model=$3 beams=$4 batches=$5
  shift 5
  read -r data src tgt _ _ <<<"$(pair "$p")"
  for beam in $beams; do
    for batch in $batches; do
      $B translate --model "$model" --input "$data/test.$src" --beam "$beam" --batch "$batch" \
        --output "$RUNS/hyp.$tgt" --stats "$RUNS/stats.json" "$@" 2>/dev/null
      local bleu size
      bleu=$($B bleu --ref "$data/test.$tgt" --hyp "$RUNS/hyp.$tgt" --json)
      size=$(du -sb --exclude=heads --exclude='*.bpk' "$model" | cut -f1)
      python3 - "$RUNS/stats.json" "$bleu" "$p" "$name" "$size" <<'PY' >> "$ROWS"
import json, sys
stats = json.load(open(sys.argv[1]))
row = dict(pair=sys.argv[3], model=sys.argv[4], bleu=json.loads(sys.argv[2])["score"],
           words_per_s=stats["words_per_s"], seconds=stats["seconds"], beam=stats["beam"],
           batch=stats["batch"], vmap=stats.get("vmap"), bytes=int(sys.argv[5]))
print(json.dumps(row))
PY
    done
  done
}

# vmap DIR: the vocabulary map of the student in DIR, from the pairs it trained on (a distilled
# student's target words are the teacher's).
vmap() {
  local distilled=()
  case $1 in *distilled*) distilled=(--distilled "$RUNS/$p-distilled") ;; esac
  $B build-vmap --model "$1" --data "$data" --src "$src" --tgt "$tgt" "${distilled[@]}" --out "$1.vmap"
}

# trained DIR: DIR holds a finished run; otherwise it says why its rows are skipped. A run
# still training exports its best epoch so far, which is not the model to report.
trained() {
  if ! [ -d "$1" ]; then
    echo "no $1: its rows are skipped (run the train stage)" >&2
    return 1
  elif ! finished "$1"; then
    echo "$1 is still training: its rows are skipped (run the train stage to its end)" >&2
    return 1
  fi
}

if [ "$STAGE" = eval ]; then
  OUT=experiments/results/nmt-distill
  mkdir -p "$OUT"
  ROWS=$OUT/rows.jsonl
  # Only the rows of the pairs evaluated now are replaced: `eval bible` keeps Tanaka's.
  touch "$ROWS"
  python3 - "$ROWS" $PAIRS <<'PY'
import json, os, sys
path, pairs = sys.argv[1], set(sys.argv[2:])
kept = [line for line in open(path) if line.strip() and json.loads(line)["pair"] not in pairs]
open(path + ".tmp", "w").writelines(kept)
os.replace(path + ".tmp", path)
PY
  for p in $PAIRS; do
    read -r data src tgt _ _ <<<"$(pair "$p")"
    # Figure 1: every model at beam 5, batch 16; the students also int8 with the map.
    # A model whose run is not in $RUNS (a new machine, a run still training) is named and
    # skipped, so the rows hold what exists.
    if trained "$RUNS/$p-teacher"; then evaluate "$p" teacher "$RUNS/$p-teacher" 5 16; fi
    # Figure 3 of the shipped student as an app serves it (int8 + its map): needs no run.
    if [ "$p" = tanaka ]; then
      evaluate "$p" "shipped int8+vmap" assets/models/ja-en-tiny "1 2 3 4 5" "1 16 64"
    fi
    for m in direct distilled-tiny; do
      dir=$RUNS/$p-$m
      if ! trained "$dir"; then continue; fi
      [ -d "$dir-int8" ] || $B quantize --model "$dir" --to int8 --out "$dir-int8"
      [ -f "$dir.vmap" ] || vmap "$dir"
      # Figure 3: beam 1–5 × batch 1/16/64, f32.
      evaluate "$p" "$m" "$dir" "1 2 3 4 5" "1 16 64"
      # Table 3: int16 ("quantize runtime"), the map, int8 + the map.
      [ -d "$dir-int16" ] || $B quantize --model "$dir" --to int16 --out "$dir-int16"
      evaluate "$p" "$m int16" "$dir-int16" 5 16
      evaluate "$p" "$m vmap" "$dir" 5 16 --vmap "$dir.vmap"
      evaluate "$p" "$m int8+vmap" "$dir-int8" "2 5" 16 --vmap "$dir.vmap"
    done
    for m in direct-tiny-lstm distilled-tiny-lstm distilled-micro; do
      dir=$RUNS/$p-$m
      trained "$dir" || continue
      [ -d "$dir-int8" ] || $B quantize --model "$dir" --to int8 --out "$dir-int8"
      [ -f "$dir.vmap" ] || vmap "$dir"
      # The LSTM pair answers the paper's two findings too: beam 2 beside beam 5.
      beams=5; [ "$m" = distilled-micro ] || beams="2 5"
      evaluate "$p" "$m" "$dir" "$beams" 16
      evaluate "$p" "$m int8+vmap" "$dir-int8" 5 16 --vmap "$dir.vmap"
    done
  done
  rm -f "$RUNS/stats.json" "$RUNS/hyp.en" "$RUNS/hyp.de"
  # Figure 1: BLEU against words/s at beam 5, batch 16; one curve per network through its
  # servings (f32, int16, the map, int8 + the map).
  for p in $PAIRS; do
    python3 - "$ROWS" "$p" > "$OUT/figure1-$p.jsonl" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r["pair"] == sys.argv[2] and r["beam"] == 5 and r["batch"] == 16:
        r["network"] = r["model"].split()[0]
        print(json.dumps(r))
PY
    if [ -s "$OUT/figure1-$p.jsonl" ]; then
      $B plot --input "$OUT/figure1-$p.jsonl" --series network --x words_per_s --y bleu \
        --out "$OUT/figure1-$p" --title "$p: BLEU against words/s (beam 5, batch 16, 1 thread)"
    else
      echo "no $p rows at beam 5, batch 16: no Figure 1 for $p yet" >&2
      rm -f "$OUT/figure1-$p.jsonl"
    fi
  done
  # The results file's tables, from the rows (and Marian's, once its decode stage ran).
  python3 experiments/nmt_distill_tables.py "$OUT" > "$OUT/tables.md"
fi
