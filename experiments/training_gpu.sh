#!/usr/bin/env bash
# Training speed on a GPU, ours (burn's wgpu backend: the persistent CubeCL kernels) against
# PyTorch (cuDNN) on the same card, side by side in one run, most important rows first:
#   1. the PTB-Small LSTM and GRU recipes at batch 20 and 128, tokens/s of training, ours and PyTorch;
#   2. the IME-size LM (1×256, tied, sampled softmax of 1,024, ~56k words), ours alone;
#   3. the tiny translator (bible-tiny), ours alone;
#   4. the full PTB-Small LSTM recipe on the GPU, for its perplexity against the CPU's
#      (assets/models/ptb-small-lstm/metrics.json), within what is left of DEADLINE.
# Raw rows go to $OUT/rows-$TAG.jsonl (one per line, written as they come, so a run cut short
# keeps what it measured; TAG names the card, default "gpu"), the full run's metrics to
# $OUT/full-lstm-$TAG.json; experiments/results/training-gpu.md discusses them.
#
# Ours is timed as a difference of two runs (N1 and N2 windows of the first epoch), so the
# kernels' compilation and autotuning in the first windows are not counted; PyTorch skips its
# first N1 windows the same way (--warmup). A short run before them fills CubeCL's caches on
# disk (compiled kernels, autotune results): else the first timed run pays for them alone and
# the difference overstates the speed.
#
# Made for a machine with a GPU and no Rust: build here, copy, run there.
#   cargo build --release --features wgpu && mkdir -p gpu && strip -o gpu/fastsoftmax target/release/fastsoftmax
#   ./target/release/fastsoftmax data fetch ptb        # data/ptb, carried with gpu/
#   ./target/release/fastsoftmax data fetch bible      # data/bible (optional: the translator row)
#   head -c 36000000 data/ja/train.txt | head -n -1 > gpu/ja-train.txt   # optional: the IME row
#   B=gpu/fastsoftmax DEADLINE=540 bash experiments/training_gpu.sh [N1] [N2]   # needs torch with CUDA
# BASE=gpu/fastsoftmax-OLD adds an earlier build's PTB rows (`-base`), for a before/after on one
# card; XENT_SPLITS="4 8 16" adds rows of this build with the output layer's backward product
# cut into that many slices (see `split_k_product` in crates/nn/src/fused/cube.rs); CELLS and
# BATCHES narrow the PTB grid (default "lstm gru" and "20 128"). PROFILE=1 adds
# a per-kernel time profile of the batch-128 LSTM; FULL=0 skips the full run.
# (Binaries and texts may travel xz-compressed as gpu/*.xz: they are unpacked first.)
set -uo pipefail
cd "$(dirname "$0")/.."
N1=${1:-20}
N2=${2:-200}
B=${B:-./target/release/fastsoftmax}
PYTHON=${PYTHON:-python3}
OUT=${OUT:-experiments/results/training-gpu}
TAG=${TAG:-gpu}                  # the card, in the output names: rows-h200.jsonl
DEADLINE=${DEADLINE:-0}          # seconds this script may take (0: no full run)
RUN_LIMIT=${RUN_LIMIT:-150}      # seconds one speed run may take before it is abandoned
mkdir -p "$OUT" runs/gpu
LOGS=runs/gpu/logs
mkdir -p "$LOGS"
trap 'tar -czf "$OUT/logs.tar.gz" -C runs/gpu logs 2>/dev/null' EXIT

for f in gpu/*.xz; do [ -f "$f" ] && python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[1][:-3],'wb'))" "$f"; done
[ -f "$B" ] && chmod +x "$B"
# A machine without a Vulkan loader gets one from .gl/ (see the device tool's notes).
if ls .gl/*.deb >/dev/null 2>&1; then
  for f in .gl/*.deb; do dpkg -x "$f" /; done
  ldconfig
fi
nvidia_icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
[ -f "$nvidia_icd" ] && export VK_DRIVER_FILES="$nvidia_icd"
{ nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; nproc; $PYTHON -c "import torch; print('torch', torch.__version__, 'cudnn', torch.backends.cudnn.version())"; } > "$LOGS/machine.txt" 2>&1

ROWS="$OUT/rows-$TAG.jsonl"
: > "$ROWS"
row() { echo "$1" >> "$ROWS"; echo "$1"; }

# Times one of our training commands at N1 and N2 windows (or batches); prints a JSON row.
#   ours NAME KIND(lm|nmt) CONFIG EXTRA-ARGS...
ours() {
  local name=$1 kind=$2 cfg=$3
  shift 3
  local secs=() toks=() n
  if [ "$DEADLINE" -gt 0 ] && [ "$SECONDS" -gt $(( DEADLINE - 60 )) ]; then
    row "{\"system\": \"fastsoftmax\", \"name\": \"$name\", \"error\": \"skipped: $SECONDS s of $DEADLINE gone\"}"
    return
  fi
  for n in warm "$N1" "$N2"; do
    local dir="runs/gpu/$name-$n" windows=$n
    [ "$n" = warm ] && windows=3
    rm -rf "$dir"
    if [ "$kind" = lm ]; then
      timeout "$RUN_LIMIT" $B train-lm --config "$cfg" --backend wgpu --out "$dir" --max-windows "$windows" --quiet "$@" 2> "$LOGS/$name-$n.log"
    else
      timeout "$RUN_LIMIT" $B train-nmt --config "$cfg" --backend wgpu --out "$dir" --max-batches "$windows" --quiet "$@" 2> "$LOGS/$name-$n.log"
    fi
    local rc=$?
    if [ $rc -ne 0 ]; then
      row "{\"system\": \"fastsoftmax\", \"name\": \"$name\", \"windows\": \"$n\", \"error\": \"exit $rc (see logs/$name-$n.log)\"}"
      return
    fi
    [ "$n" = warm ] && continue
    read -r s t < <(python3 -c "import json; e=json.load(open('$dir/metrics.json'))['epochs'][0]; print(e['seconds'], e['seconds']*e['tokens_per_s'])")
    secs+=("$s"); toks+=("$t")
  done
  row "$(python3 -c "import json; s=[${secs[0]},${secs[1]}]; t=[${toks[0]},${toks[1]}]; print(json.dumps({'system':'fastsoftmax','backend':'wgpu','name':'$name','windows':[$N1,$N2],'seconds':s,'tokens':t,'tokens_per_s':(t[1]-t[0])/(s[1]-s[0])}))")"
}

# Validation and test are outside the clock; a slice of the validation text keeps them short.
head -c "${EVAL_BYTES:-20000}" data/ptb/ptb.valid.txt | head -n -1 > runs/gpu/eval.txt
for cell in ${CELLS:-lstm gru}; do
  for batch in ${BATCHES:-20 128}; do
    cfg="runs/gpu/$cell-$batch.json"
    python3 -c "import json; c=json.load(open('experiments/configs/ptb-small-$cell.json')); c['train']['epochs']=1; c['train']['batch_size']=$batch; json.dump(c,open('$cfg','w'))"
    ours "ptb-$cell-$batch" lm "$cfg" --valid runs/gpu/eval.txt --test runs/gpu/eval.txt
    # BASE: an earlier build, timed the same way on the same card (a before/after in one run).
    if [ -n "${BASE:-}" ]; then
      B=$BASE ours "ptb-$cell-$batch-base" lm "$cfg" --valid runs/gpu/eval.txt --test runs/gpu/eval.txt
    fi
    # XENT_SPLITS="4 8 16": the same build with the sum of the output layer's dlogits · Wᵀ cut
    # into that many slices (FASTSOFTMAX_XENT_SPLIT; 1, one product, is the default).
    for s in ${XENT_SPLITS:-}; do
      FASTSOFTMAX_XENT_SPLIT=$s ours "ptb-$cell-$batch-split$s" lm "$cfg" --valid runs/gpu/eval.txt --test runs/gpu/eval.txt
    done
    timeout "$RUN_LIMIT" $PYTHON experiments/peers/train_lm_torch.py --config "$cfg" --device cuda --warmup "$N1" \
      --max-windows "$N2" --epochs 1 --no-valid --json 2> "$LOGS/torch-$cell-$batch.log" \
      | sed "s/^{/{\"system\": \"pytorch\", \"name\": \"ptb-$cell-$batch\", /" | tee -a "$ROWS"
  done
done

# The IME-size LM: the shipped IME recipe's shape on a slice of its text, every word kept
# (min_count 1 on 36 MB gives ~56k words, the size of the trained IME vocabulary).
if [ -f gpu/ja-train.txt ]; then
  head -n 500 gpu/ja-train.txt > runs/gpu/ja-eval.txt
  python3 -c "import json; c=json.load(open('experiments/configs/ime-lstm.json')); c['train']['epochs']=1; c['train']['min_count']=1; json.dump(c,open('runs/gpu/ime.json','w'))"
  ours ime-lstm-80 lm runs/gpu/ime.json --train gpu/ja-train.txt --valid runs/gpu/ja-eval.txt --test runs/gpu/ja-eval.txt
  if [ -n "${BASE:-}" ]; then
    B=$BASE ours ime-lstm-80-base lm runs/gpu/ime.json --train gpu/ja-train.txt --valid runs/gpu/ja-eval.txt --test runs/gpu/ja-eval.txt
  fi
fi

# The tiny translator (bible-tiny: bidirectional GRU encoder on the kernels, input-feeding
# decoder composed), ours only: PyTorch's side is a trainer this project does not have yet.
if [ -f data/bible/train.en ]; then
  python3 -c "import json; c=json.load(open('experiments/configs/bible-tiny.json')); c['train']['epochs']=1; json.dump(c,open('runs/gpu/nmt.json','w'))"
  ours bible-tiny nmt runs/gpu/nmt.json --max-valid 16
fi

# PROFILE=1: where a window's time goes on this card. One short run of the batch-128 LSTM with
# CubeCL's profiler on (it times every kernel, so the run itself is slower), summed per kernel
# name into $OUT/profile-$TAG.txt: the persistent recurrent kernels against burn's own launches.
if [ "${PROFILE:-0}" = 1 ] && [ -f runs/gpu/lstm-128.json ]; then
  rm -rf runs/gpu/profile && start=$SECONDS
  CUBECL_DEBUG_LOG="$LOGS/cubecl-profile.log" CUBECL_DEBUG_OPTION=profile \
    timeout "$RUN_LIMIT" $B train-lm --config runs/gpu/lstm-128.json --backend wgpu --out runs/gpu/profile \
    --max-windows "${PROFILE_WINDOWS:-12}" --valid runs/gpu/eval.txt --test runs/gpu/eval.txt --quiet 2> "$LOGS/profile.log"
  echo "profiled run: exit $?, $(( SECONDS - start )) s" >> "$LOGS/profile.log"
  python3 - "$LOGS/cubecl-profile.log" "${PROFILE_WINDOWS:-12}" > "$OUT/profile-$TAG.txt" <<'PY'
import re, sys, collections
unit = {"ns": 1e-3, "µs": 1.0, "us": 1.0, "ms": 1e3, "s": 1e6}
pat = re.compile(r"^\|\s*([0-9.]+)(ns|µs|us|ms|s)\s*\|\s*(.*)$")
total, count = collections.Counter(), collections.Counter()
for line in open(sys.argv[1], errors="replace"):
    m = pat.match(line.strip())
    if m:
        name = re.sub(r"\s+", " ", m.group(3))[:140]
        total[name] += float(m.group(1)) * unit[m.group(2)]
        count[name] += 1
windows = int(sys.argv[2])
print(f"kernels timed by CubeCL's profiler over a {windows}-window run (compilation and autotune included)")
print(f"{'total µs':>12} {'launches':>9} {'mean µs':>9}  kernel")
for name, t in total.most_common():
    print(f"{t:12.0f} {count[name]:9d} {t / count[name]:9.1f}  {name}")
print(f"{sum(total.values()):12.0f} {sum(count.values()):9d}            all")
PY
  gzip -kf "$LOGS/cubecl-profile.log" 2>/dev/null
fi

# The full PTB-Small LSTM recipe, for its perplexity against the CPU's, in what time is left.
if [ "$DEADLINE" -gt 0 ] && [ "${FULL:-1}" = 1 ]; then
  left=$(( (DEADLINE - SECONDS - 45) / 60 ))
  if [ "$left" -ge 1 ]; then
    timeout $(( DEADLINE - SECONDS - 5 )) $B train-lm --config experiments/configs/ptb-small-lstm.json --backend wgpu \
      --out runs/gpu/full-lstm --budget-minutes "$left" --quiet 2> "$LOGS/full-lstm.log"
    echo "full run: exit $? after a budget of $left min" >> "$LOGS/full-lstm.log"
    cp runs/gpu/full-lstm/metrics.json "$OUT/full-lstm-$TAG.json" 2>/dev/null
  else
    # On an H200 the 7 epochs take about a minute (2026-11-28): give DEADLINE two more.
    echo "full run skipped: $(( DEADLINE - SECONDS )) s of DEADLINE left, it needs 105 or more" | tee "$LOGS/full-lstm.log"
  fi
fi

python3 - "$ROWS" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
def get(system, name):
    return next((r.get("tokens_per_s") for r in rows if r["system"] == system and r.get("name") == name), None)
fmt = lambda x: "—" if x is None else f"{x:,.0f}"
print("| model | batch | ours (wgpu) tok/s | BASE build tok/s | PyTorch (cuDNN) tok/s | ours / PyTorch |")
print("| --- | ---: | ---: | ---: | ---: | ---: |")
for cell in ("lstm", "gru"):
    for batch in (20, 128):
        name = f"ptb-{cell}-{batch}"
        ours, base, torch = get("fastsoftmax", name), get("fastsoftmax", name + "-base"), get("pytorch", name)
        ratio = f"{ours / torch:.3f}" if ours and torch else "—"
        print(f"| PTB-Small {cell} | {batch} | {fmt(ours)} | {fmt(base)} | {fmt(torch)} | {ratio} |")
for r in rows:
    if r["system"] == "fastsoftmax" and "-split" in r.get("name", ""):
        print(f"| {r['name']} (dlogits · Wᵀ in slices) | | {fmt(r.get('tokens_per_s'))} | — | — | — |")
print(f"| IME-size LSTM, sampled softmax | 80 | {fmt(get('fastsoftmax', 'ime-lstm-80'))} | — | — | — |")
print(f"| bible-tiny translator (target tokens) | 64 | {fmt(get('fastsoftmax', 'bible-tiny'))} | — | — | — |")
PY
