"""Issue 38's overhead: the same work through the Rust API, the C ABI and the Python module —
top-5 of PTB contexts one at a time (batch 1) and 64 at a time, and John (the Bible's test
split, 879 verses) at beam 5 in batches of 16 — on one thread each, the three paths
interleaved TRIOS times; each run reports medians over ROUNDS, the table medians over runs.

    bash experiments/bindings_overhead.sh          # builds the three paths, then runs this

The three must do identical work: their checksums (the sum of every top-5 id) and the length
of John's translations must agree, or the script stops.
"""

import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

import fastsoftmax as fs

ROOT = Path(__file__).resolve().parents[1]
PTB = ROOT / "assets/models/ptb-small-lstm"
BIBLE = ROOT / "assets/models/bible-en-de-tiny"
TEXT = ROOT / "data/ptb/ptb.test.txt"
JOHN = ROOT / "data/bible/test.en"
WORDS, ROUNDS, TRIOS = (int(x) for x in sys.argv[1:4]) if len(sys.argv) > 3 else (4000, 5, 3)
RUST = ROOT / "target/release/examples/overhead"
C = ROOT / "target/overhead-c"
K, BATCH, LINES = 5, 64, 16
ARGS = [str(PTB), str(TEXT), str(WORDS), str(BIBLE), str(JOHN), str(ROUNDS)]


def python_path():
    p = fs.Predictor(PTB)
    rows, n = [], 0
    for line in TEXT.read_text().splitlines():
        words = line.split()[: WORDS - n]
        if words:
            rows.append(p.contexts(" ".join(words)))
            n += len(words)
        if n == WORDS:
            break
    h = np.concatenate(rows)
    one, many, checksum = [], [], 0
    for _ in range(ROUNDS):
        t = time.perf_counter()
        for i in range(len(h)):
            ids, _ = p.topk_batch(h[i : i + 1], K)
            checksum += int(ids.sum(dtype=np.uint64))
        one.append((time.perf_counter() - t) * 1e6 / len(h))
        t = time.perf_counter()
        for i in range(0, len(h), BATCH):
            ids, _ = p.topk_batch(h[i : i + BATCH], K)
            checksum += int(ids.sum(dtype=np.uint64))
        many.append((time.perf_counter() - t) * 1e6 / len(h))
    t = fs.Translator(BIBLE)
    john = JOHN.read_text().splitlines()
    seconds, chars = [], 0
    for _ in range(ROUNDS):
        start = time.perf_counter()
        for i in range(0, len(john), LINES):
            chars += sum(len(s.encode()) for s in t.translate(john[i : i + LINES]))
        seconds.append(time.perf_counter() - start)
    return dict(path="python", contexts=len(h), batch1_us=statistics.median(one),
                batch64_us=statistics.median(many), john_s=statistics.median(seconds),
                checksum=checksum // ROUNDS, john_chars=chars // ROUNDS)


def native(exe):
    out = subprocess.run([str(exe), *ARGS], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


runs = {"rust": [], "c": [], "python": []}
for trio in range(TRIOS):
    for name, run in [("rust", lambda: native(RUST)), ("c", lambda: native(C)), ("python", python_path)]:
        r = run()
        runs[name].append(r)
        print(f"trio {trio + 1}/{TRIOS} {name}: {r}", file=sys.stderr)
first = runs["rust"][0]
for name, rs in runs.items():
    for r in rs:
        if (r["checksum"], r["john_chars"], r["contexts"]) != (first["checksum"], first["john_chars"], first["contexts"]):
            sys.exit(f"{name} did other work than rust: {r} vs {first}")

table = {}
for name, rs in runs.items():
    table[name] = {m: statistics.median(r[m] for r in rs) for m in ("batch1_us", "batch64_us", "john_s")}
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), platform.processor())
rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT).stdout.strip()
result = dict(
    command="bash experiments/bindings_overhead.sh", revision=rev, date=time.strftime("%Y-%m-%d"),
    machine=f"{cpu}, nproc {os.cpu_count()}", contexts=first["contexts"], rounds=ROUNDS, trios=TRIOS,
    python=platform.python_version(), numpy=np.__version__, medians=table, runs=runs,
)
out = ROOT / "experiments/results/bindings-overhead.json"
out.write_text(json.dumps(result, indent=2) + "\n")
rust = table["rust"]
print("| path | batch 1 (µs/context) | vs Rust | batch 64 (µs/context) | vs Rust | John, beam 5 (s) | vs Rust |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
for name in ("rust", "c", "python"):
    m = table[name]
    ratio = lambda key: f"{100 * (m[key] / rust[key] - 1):+.1f} %"
    print(f"| {name} | {m['batch1_us']:.1f} | {ratio('batch1_us')} | {m['batch64_us']:.2f} | {ratio('batch64_us')} | {m['john_s']:.3f} | {ratio('john_s')} |")
