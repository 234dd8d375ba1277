#!/usr/bin/env bash
# Issue 38: the C ABI's and the Python module's overhead over the Rust API on the same work
# (experiments/bindings_overhead.py says what). Builds the three paths, installs the wheel into
# a venv of its own (runs/venv-py), and writes experiments/results/bindings-overhead.json; the
# table it prints goes to experiments/results/bindings-overhead.md. One thread on every path.
#
#   bash experiments/bindings_overhead.sh [WORDS ROUNDS TRIOS]   # default 4000 5 3
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -p fastsoftmax-capi --lib --example overhead
cc -O2 -Wall -Wextra -Werror -o target/overhead-c crates/capi/examples/c/overhead.c \
  -Icrates/capi/include target/release/libfastsoftmax_c.a -lm -lpthread -ldl
VENV=${VENV:-runs/venv-py}
[ -x "$VENV/bin/maturin" ] || { python3 -m venv "$VENV" && "$VENV/bin/pip" install -q maturin numpy; }
"$VENV/bin/maturin" build --release -m crates/python/Cargo.toml -o target/wheels
"$VENV/bin/pip" install -q --force-reinstall --no-deps target/wheels/fastsoftmax-*.whl
./target/release/fastsoftmax data fetch ptb >/dev/null
./target/release/fastsoftmax data fetch bible >/dev/null
"$VENV/bin/python" experiments/bindings_overhead.py "$@"
