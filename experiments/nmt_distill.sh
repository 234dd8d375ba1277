#!/usr/bin/env bash
# Issue 35: sequence-level distillation (Kim & Rush 2016) on both pairs, as the OpenNMT
# WNMT-2018 system trains its students: a Transformer teacher, its beam-5 translations of the
# training source, and the tiny GRU trained on the references (direct) and on the teacher's
# translations (distilled) with the same recipe and budget.
#
#   bash experiments/nmt_distill.sh train [tanaka|bible]   # every model, resuming what started
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

# train CONFIG DATA SRC TGT OUT [ARGS…]: train-nmt, resumed when OUT holds a started run.
train() {
  local config=$1 data=$2 src=$3 tgt=$4 out=$5
  shift 5
  if [ -f "$out/metrics.json" ]; then return; fi
  local resume=()
  if [ -f "$out/train_state.json" ]; then resume=(--resume); fi
  $B train-nmt --config "$config" --data "$data" --src "$src" --tgt "$tgt" --out "$out" \
    --quiet "${resume[@]}" "$@" 2>&1 | tee -a "$out.log"
}

pair() {
  case $1 in
    tanaka) echo "data/tanaka ja en experiments/configs/tanaka-transformer.json experiments/configs/tanaka-tiny.json" ;;
    bible) echo "data/bible en de experiments/configs/bible-transformer.json experiments/configs/bible-tiny-ls.json" ;;
  esac
}

if [ "$STAGE" = train ]; then
  $B data fetch tanaka --from "$FROM"
  $B data fetch bible
  for p in $PAIRS; do
    read -r data src tgt teacher student <<<"$(pair "$p")"
    train "$teacher" "$data" "$src" "$tgt" "$RUNS/$p-teacher"
    $B distill --teacher "$RUNS/$p-teacher" --data "$data" --src "$src" --tgt "$tgt" \
      --out "$RUNS/$p-distilled" --beam 5 --quiet
    # The Bible's direct student is the shipped translator, trained by the same config (its
    # command.txt): linked rather than trained twice.
    if [ "$p" = bible ] && [ ! -e "$RUNS/bible-direct" ]; then
      ln -s "$PWD/assets/models/bible-en-de-tiny" "$RUNS/bible-direct"
    fi
    train "$student" "$data" "$src" "$tgt" "$RUNS/$p-direct"
    train "$student" "$data" "$src" "$tgt" "$RUNS/$p-distilled-tiny" --distilled "$RUNS/$p-distilled"
  done
fi
