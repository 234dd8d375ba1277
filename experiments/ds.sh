#!/usr/bin/env bash
# DS-Softmax on PTB-Small: mitosis training 2 → 64 experts (DS-8 is its 8-expert stage), the
# DS-64* variant (pruning may remove a word's last copy, continued from the 32-expert stage),
# test-set accuracy and speed against the full softmax in one bench run, the memory curve
# (Figure D.1), redundancy vs frequency (Figure C.1), the synthetic check (Appendix A), then
# the synthetic check from a random gate and Figure A.1's ablations (each regulariser off).
# Raw outputs go to experiments/results/ds/; experiments/results/ds-softmax.md discusses them.
#
#   bash experiments/ds.sh                  # ~2 h on 2 cores; run it on an otherwise idle machine
#   ONLY=ablations bash experiments/ds.sh   # steps 8b and 9 alone, ~100 min
#   ONLY=ablations ABLATIONS=no-lasso bash experiments/ds.sh   # one term of step 9
#   ONLY=table3 bash experiments/ds.sh      # step 10 alone (DS-2, then SVD in the experts), ~15 min
#
# Heads are trained into a copy of the model under runs/ so the shipped model keeps only `ds`.
set -euo pipefail
cd "$(dirname "$0")/.."

cargo build --release
B=./target/release/fastsoftmax
SRC=$(bash experiments/f32_model.sh ptb-small-lstm)  # the f32 model the results were measured on
M=runs/ds/model
OUT=experiments/results/ds
mkdir -p "$OUT" "$M"
$B data fetch ptb
cp "$SRC"/manifest.json "$SRC"/model.safetensors "$M"/
# ONLY=ablations skips steps 1–8, keeping the heads of an earlier run; the ablations' bench then
# needs only `ds`, taken from the shipped model when that run's is missing.
if [ -z "${ONLY:-}" ]; then
  rm -rf "$M"/heads

  # 1. Mitosis 2 → 64 experts (k-means gate and splits, λ = 1e-4), every stage saved (ds-2 …
  #    ds-32); its 64-expert result, pruned for 2 epochs at λ = 1e-4, is kept as ds-fast.
  $B train-head ds --model "$M" --config experiments/configs/ds.json --save-stages --quiet \
      2> "$OUT/train-ds64-mitosis.log"
  mv "$M/heads/ds" "$M/heads/ds-fast"
  # 2. The shipped DS-64: the last stage again from ds-32 with a lighter lasso (λ = 3e-5, 1 epoch).
  $B train-head ds --model "$M" --config experiments/configs/ds-final.json --resume-from ds-32 \
      --lambda 3e-5 --name ds --quiet 2> "$OUT/train-ds64.log"
  # 3. DS-64*: the same last stage without the at-least-one-copy constraint.
  $B train-head ds --model "$M" --config experiments/configs/ds-final.json --resume-from ds-32 \
      --lambda 3e-5 --allow-lost-words --name ds-star --quiet 2> "$OUT/train-ds64-star.log"
  # 4. The same last stage at λ = 5e-5, between ds-fast's 1e-4 and the shipped 3e-5.
  $B train-head ds --model "$M" --config experiments/configs/ds-final.json --resume-from ds-32 \
      --lambda 5e-5 --name ds-l5e-5 --quiet 2> "$OUT/train-ds64-l5e-5.log"
  # 5. Ablation: a random first gate and Gaussian twin splits (U ± ε), same schedule otherwise.
  $B train-head ds --model "$M" --config experiments/configs/ds-random.json --name ds-random --quiet \
      2> "$OUT/train-ds64-random.log"

  # 5b. The paper's Algorithm 2: a random first gate and a fresh random gate at every mitosis.
  $B train-head ds --model "$M" --config experiments/configs/ds-paper.json --name ds-paper --quiet \
      2> "$OUT/train-ds64-paper.log"

  # 6. Test set: accuracy against the next word, P@k against the full softmax, speed (one run,
  #    the results file's table).
  $B bench --model "$M" --text data/ptb/ptb.test.txt \
      --heads full,ds-2,ds-4,ds-8,ds-16,ds-32,ds,ds-star,ds-fast,ds-l5e-5,ds-random \
      --max-contexts 100000 --repeats 5 --json > "$OUT/bench.jsonl"
  # The paper's gate, benched later on its own (accuracy and FLOPs; its times are not comparable).
  $B bench --model "$M" --text data/ptb/ptb.test.txt --heads full,ds-paper --max-contexts 100000 \
      --repeats 1 --json > "$OUT/bench-paper.jsonl"

  # 7. Figures D.1 (memory, from the mitosis run) and C.1 (redundancy of the shipped head). The
  #    shipped head's own memory curve covers only its resumed last stage, so it is not kept.
  $B ds-figures --model "$M" --head ds-fast --out "$OUT/mitosis"
  $B ds-figures --model "$M" --head ds --out "$OUT"
  rm -f "$OUT/memory.png"

  # 8. Appendix A.
  $B synthetic --supers 10 --subs 10 --out "$OUT/synthetic-10x10" 2> "$OUT/synthetic-10x10.log"
  $B synthetic --supers 100 --subs 100 --config experiments/configs/ds-synthetic-100.json --out "$OUT/synthetic-100x100" 2> "$OUT/synthetic-100x100.log"
else
  [ -d "$M/heads/ds" ] || { mkdir -p "$M/heads" && cp -r "$SRC/heads/ds" "$M/heads/"; }
fi

if [ "${ONLY:-}" != table3 ]; then
# 8b. Appendix A from the paper's random first gate (`gate_init = "random"`): the k-means gate
#     of step 8 finds the super classes on the features before DS trains; here DS must.
#     Seconds for 10×10, ~8 min for 100×100; skipped when ABLATIONS is set (below).
for size in 10 100; do
  [ -z "${ABLATIONS:-}" ] || break
  $B synthetic --supers $size --subs $size \
      --config "experiments/configs/ds-synthetic-$size-random-gate.json" \
      --out "$OUT/synthetic-${size}x$size-random-gate" 2> "$OUT/synthetic-${size}x$size-random-gate.log"
done

# 9. Figure A.1: one regulariser switched off at a time by its λ = 0 (configs
#    ds-*-no-{lasso,expert-lasso,load}.json, otherwise identical to their bases).
ALL_ABLATIONS="no-lasso no-expert-lasso no-load"
# ABLATIONS="no-lasso" trains that one alone (8b is skipped; 9a takes seconds, 9b 20–60 min a term);
# the bench of 9c takes every ablated head that exists.
ABLATIONS=${ABLATIONS:-$ALL_ABLATIONS}
# 9a. The paper's own ablation: the 10×10 synthetic task (maps beside step 8's), seconds each.
for term in $ABLATIONS; do
  $B synthetic --supers 10 --subs 10 --config "experiments/configs/ds-synthetic-10-$term.json" \
      --out "$OUT/synthetic-10x10-$term" 2> "$OUT/synthetic-10x10-$term.log"
done
# 9b. PTB, both recipes with the term off throughout: the mitosis run of step 1 (ds-fast-TERM
#     beside ds-fast, its stages ds-TERM-2 … ds-TERM-32), then the shipped head's last stage
#     (step 2) from its own ds-TERM-32 (ds-TERM beside ds). The λs are in the configs: --lambda
#     would set both lassos. ~19 min per term that prunes like ds. Without the group lasso no
#     row is pruned and the rows double at every split, so its mitosis stops at 16 experts
#     (ds-ablation-no-lasso.json; ~40 min, 124 MB of rows), and there is no 32-expert stage
#     for a last stage to start from.
# A term whose heads exist in $M (an earlier run's, with ONLY=ablations) is not trained again.
# A term has a last stage where it has a -final config.
for term in $ABLATIONS; do
  final=experiments/configs/ds-ablation-$term-final.json
  [ -d "$M/heads/ds-fast-$term" ] && { [ ! -f "$final" ] || [ -d "$M/heads/ds-$term" ]; } &&
    continue
  rm -rf "$M/heads/ds-fast-$term"
  $B train-head ds --model "$M" --config "experiments/configs/ds-ablation-$term.json" \
      --save-stages --name "ds-$term" --quiet 2> "$OUT/train-ds64-$term-mitosis.log"
  mv "$M/heads/ds-$term" "$M/heads/ds-fast-$term"
  [ -f "$final" ] || continue
  $B train-head ds --model "$M" --config "$final" \
      --resume-from "ds-$term-32" --name "ds-$term" --quiet 2> "$OUT/train-ds64-$term.log"
done
# 9c. Test set, the ablated heads beside those they are compared with, in one bench run.
HEADS=full,ds
[ -d "$M/heads/ds-fast" ] && HEADS+=,ds-fast
for term in $ALL_ABLATIONS; do
  for h in "ds-fast-$term" "ds-$term"; do [ -d "$M/heads/$h" ] && HEADS+=",$h"; done
done
$B bench --model "$M" --text data/ptb/ptb.test.txt --heads "$HEADS" \
    --max-contexts 100000 --repeats 5 --json > "$OUT/bench-ablations.jsonl"
fi

# 10. Table 3: SVD-softmax inside the learned experts (`NAME+svd-rR-pP`: a rank-R preview of
#     each expert's logits, exact logits for its best P %, built at load). The paper's two rows:
#     SVD-10 on DS-2 and SVD-50 on DS-64, beside SVD-10 on the full layer; preview rank 16, the
#     paper's window width. DS-2 is its own run: two experts from the start, no mitosis, the
#     shipped head's λ.
if [ "${ONLY:-}" = table3 ] || [ -z "${ONLY:-}" ]; then
  rm -rf "$M/heads/ds2"
  $B train-head ds --model "$M" --config experiments/configs/ds-2.json --name ds2 --quiet \
      2> "$OUT/train-ds2.log"
  $B bench --model "$M" --text data/ptb/ptb.test.txt \
      --heads full,svd-r16-n1000,ds2,ds2+svd-r16-p10,ds,ds+svd-r16-p50 \
      --max-contexts 100000 --repeats 5 --json > "$OUT/bench-table3.jsonl"
fi
