#!/usr/bin/env bash
# Marian with its own speed-ups against our fast configurations (issue 17), one run, beam 5,
# batches of 16, 1 thread, on John (879 verses):
# - ours: the f32 engine, int8 + the vocabulary map n2-f2-N10, int8 + the L2S head;
# - Marian (`nmt_marian.sh`'s model, `pymarian` 1.12): f32; its lexical shortlist
#   (`--shortlist lex.s2t FIRST BEST`: the FIRST most frequent target words plus each source
#   word's BEST translations, from our aligner's links, `marian_shortlist.py`); its 8-bit FBGEMM
#   product packed on the fly (`--gemm-type packed8avx512`, `packed8avx2` on a CPU without
#   AVX-512); both together.
# Marian's packed models converted ahead (`pymarian convert -g packed8avx512` / `intgemm8`)
# crash on this RNN model (segmentation fault in the decoder; `packed16` is refused as a type
# mismatch), as the upstream issue marian-dev#832 reports for s2s models, so the on-the-fly
# packing is Marian's int8 here.
#
#   PYTHON=/tmp/pv/bin/python bash experiments/peers/nmt_marian_fast.sh [MARIAN_DIR] [MODEL]
set -euo pipefail
cd "$(dirname "$0")/../.."
MD=${1:-runs/marian}
MODEL=${2:-$(bash experiments/bible_f32.sh)}  # the f32 model the results were measured on
PYTHON=${PYTHON:-python3}
OUT=experiments/results/nmt-fast
B=./target/release/fastsoftmax
T=data/bible/test
HM=${HEADS_MODEL:-runs/bible-heads}
[ -f "$MD/model.npz" ] || { echo "no Marian model in $MD: run experiments/peers/nmt_marian.sh" >&2; exit 1; }
[ -d "$HM/heads/l2s" ] || { echo "no L2S head in $HM: run experiments/nmt_fast.sh first" >&2; exit 1; }
[ -f "$OUT/train.links" ] || $B build-vmap --out "$OUT/n2-f2-N10.vmap" --links-out "$OUT/train.links" >/dev/null
[ -f "$MD/lex.s2t" ] || $PYTHON experiments/peers/marian_shortlist.py --src "$MD/train.en" \
  --tgt "$MD/train.de" --links "$OUT/train.links" --out "$MD/lex.s2t"
INT8=$(mktemp -d)/int8
$B quantize --model "$HM" --out "$INT8" >/dev/null
ROWS=$OUT/marian-rows.jsonl
: > "$ROWS"

SRC=en TGT=de SCRATCH=$OUT MARIAN_ARGS=()
. experiments/peers/marian_rows.sh

ours f32 "$MODEL"
ours int8+vmap "$INT8" --vmap "$OUT/n2-f2-N10.vmap"
ours int8+l2s "$INT8" --head l2s
marian f32
marian "shortlist 100 100" --shortlist "$MD/lex.s2t" 100 100
marian "shortlist 50 50" --shortlist "$MD/lex.s2t" 50 50
marian packed8 --gemm-type $PACKED8
marian "packed8 + shortlist 100 100" --gemm-type $PACKED8 --shortlist "$MD/lex.s2t" 100 100
marian "packed8 + shortlist 50 50" --gemm-type $PACKED8 --shortlist "$MD/lex.s2t" 50 50
rm -rf "$OUT/stats.json" "$OUT/hyp.de" "$(dirname "$INT8")"
python3 - "$ROWS" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
base = next(r for r in rows if r["system"] == "ours" and r["config"] == "f32")
m32 = next(r for r in rows if r["system"] == "marian" and r["config"] == "f32")
print("| system | config | BLEU | words/s | vs our f32 | vs Marian f32 |")
print("| --- | --- | ---: | ---: | ---: | ---: |")
for r in rows:
    wps = r.get("words_per_s") or r["target_words"] / r["seconds"]
    bw = base.get("words_per_s") or base["target_words"] / base["seconds"]
    mw = m32.get("words_per_s") or m32["target_words"] / m32["seconds"]
    print(f"| {r['system']} | {r['config']} | {r['bleu']:.2f} | {wps:,.0f} | {wps / bw:.2f}x | {wps / mw:.2f}x |")
PY
