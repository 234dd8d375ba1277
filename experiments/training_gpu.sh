#!/usr/bin/env bash
# Training speed on a GPU, ours (burn's wgpu backend: the persistent CubeCL kernels) against
# PyTorch (cuDNN) on the same card, side by side in one run: the PTB-Small LSTM and GRU recipes
# at batch 20 and 128, tokens/s of training; and the tiny translator, ours alone. Raw rows go to experiments/results/training-gpu/;
# experiments/results/training-gpu.md discusses them.
#
# Ours is timed as a difference of two runs (N1 and N2 windows of the first epoch), so the
# kernels' compilation and autotuning in the first windows are not counted; PyTorch skips its
# first N1 windows the same way (--warmup).
#
# Made for a machine with a GPU and no Rust: build here, copy, run there.
#   cargo build --release --features wgpu && mkdir -p gpu && cp target/release/fastsoftmax gpu/
#   ./target/release/fastsoftmax data fetch ptb        # data/ptb, carried with gpu/
#   ./target/release/fastsoftmax data fetch bible      # data/bible (optional: the translator row)
#   B=gpu/fastsoftmax bash experiments/training_gpu.sh [N1] [N2]   # needs torch with CUDA
set -euo pipefail
cd "$(dirname "$0")/.."
N1=${1:-20}
N2=${2:-200}
B=${B:-./target/release/fastsoftmax}
PYTHON=${PYTHON:-python3}
OUT=${OUT:-experiments/results/training-gpu}
mkdir -p "$OUT" runs/gpu

# A machine without a Vulkan loader gets one from .gl/ (see the device tool's notes).
if ls .gl/*.deb >/dev/null 2>&1; then
  for f in .gl/*.deb; do dpkg -x "$f" /; done
  ldconfig
fi
nvidia_icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
[ -f "$nvidia_icd" ] && export VK_DRIVER_FILES="$nvidia_icd"

: > "$OUT/rows.jsonl"
# Validation and test are outside the clock; a slice of the validation text keeps them short.
head -c "${EVAL_BYTES:-20000}" data/ptb/ptb.valid.txt | head -n -1 > runs/gpu/eval.txt
for cell in lstm gru; do
  for batch in 20 128; do
    cfg="runs/gpu/$cell-$batch.json"
    python3 -c "import json,sys; c=json.load(open('experiments/configs/ptb-small-$cell.json')); c['train']['epochs']=1; c['train']['batch_size']=$batch; json.dump(c,open('$cfg','w'))"
    secs=()
    toks=()
    for n in "$N1" "$N2"; do
      rm -rf "runs/gpu/$cell-$batch-$n"
      $B train-lm --config "$cfg" --backend wgpu --valid runs/gpu/eval.txt --test runs/gpu/eval.txt --out "runs/gpu/$cell-$batch-$n" --max-windows "$n" --quiet 2> "runs/gpu/$cell-$batch-$n.log"
      read -r s t < <(python3 -c "import json; e=json.load(open('runs/gpu/$cell-$batch-$n/metrics.json'))['epochs'][0]; print(e['seconds'], e['seconds']*e['tokens_per_s'])")
      secs+=("$s")
      toks+=("$t")
    done
    python3 -c "import json; s=[${secs[0]},${secs[1]}]; t=[${toks[0]},${toks[1]}]; print(json.dumps({'system':'fastsoftmax','backend':'wgpu','cell':'$cell','batch':$batch,'windows':[$N1,$N2],'seconds':s,'tokens':t,'tokens_per_s':(t[1]-t[0])/(s[1]-s[0])}))" >> "$OUT/rows.jsonl"
    $PYTHON experiments/peers/train_lm_torch.py --config "$cfg" --device cuda --warmup "$N1" \
      --max-windows "$N2" --epochs 1 --no-valid --json \
      | sed "s/^{/{\"system\": \"pytorch\", \"cell\": \"$cell\", \"batch\": $batch, /" >> "$OUT/rows.jsonl"
  done
done
# The tiny translator (bible-tiny: bidirectional GRU encoder on the kernels, input-feeding
# decoder composed), ours only: PyTorch's side is a trainer this project does not have yet.
if [ -f data/bible/train.en ]; then
  cfg=runs/gpu/nmt.json
  python3 -c "import json; c=json.load(open('experiments/configs/bible-tiny.json')); c['train']['epochs']=1; json.dump(c,open('$cfg','w'))"
  secs=()
  toks=()
  for n in "$N1" "$N2"; do
    rm -rf "runs/gpu/nmt-$n"
    $B train-nmt --config "$cfg" --backend wgpu --out "runs/gpu/nmt-$n" --max-batches "$n" --max-valid 16 --quiet 2> "runs/gpu/nmt-$n.log"
    read -r s t < <(python3 -c "import json; e=json.load(open('runs/gpu/nmt-$n/metrics.json'))['epochs'][0]; print(e['seconds'], e['seconds']*e['tokens_per_s'])")
    secs+=("$s")
    toks+=("$t")
  done
  python3 -c "import json; s=[${secs[0]},${secs[1]}]; t=[${toks[0]},${toks[1]}]; print(json.dumps({'system':'fastsoftmax','backend':'wgpu','model':'bible-tiny','batches':[$N1,$N2],'seconds':s,'target_tokens':t,'target_tokens_per_s':(t[1]-t[0])/(s[1]-s[0])}))" >> "$OUT/rows.jsonl"
fi
python3 - "$OUT/rows.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print("| cell | batch | ours (wgpu) tok/s | PyTorch (cuDNN) tok/s | ours / PyTorch |")
print("| --- | ---: | ---: | ---: | ---: |")
for cell in ("lstm", "gru"):
    for batch in (20, 128):
        get = lambda s: next(r["tokens_per_s"] for r in rows if r["system"] == s and r.get("cell") == cell and r.get("batch") == batch)
        ours, torch = get("fastsoftmax"), get("pytorch")
        print(f"| {cell} | {batch} | {ours:,.0f} | {torch:,.0f} | {ours / torch:.3f} |")
for r in rows:
    if r.get("model") == "bible-tiny":
        print(f"\nbible-tiny translator, ours on wgpu: {r['target_tokens_per_s']:,.0f} target tokens/s of training")
PY
