#!/usr/bin/env bash
# Captures the interactive converter's screen for the README: `fastsoftmax ime` in a tmux pane
# of 92x22, one sentence committed, a second one being typed. Writes
# experiments/results/ime/screen.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
name="fastsoftmax-ime-screen-$$"
tmux new-session -d -s "$name" -x 92 -y 22 "./target/release/fastsoftmax ime"
trap 'tmux kill-session -t "$name" 2>/dev/null || true' EXIT
wait_for() {
  for _ in $(seq 600); do
    tmux capture-pane -p -t "$name" | grep -qF "$1" && return 0
    sleep 0.1
  done
  echo "the screen never showed $1" >&2; tmux capture-pane -p -t "$name" >&2; exit 1
}
type_text() {
  local s="$1"
  for ((i = 0; i < ${#s}; i++)); do tmux send-keys -t "$name" -l "${s:i:1}"; sleep 0.05; done
}
wait_for "per-key latency appears"
type_text "kyouhaiitenkidesune."
wait_for "kana きょうはいいてんきですね。"
tmux send-keys -t "$name" Enter
wait_for "│今日はいい天気ですね。"
type_text "ashitahatomodachitokouennniikimasu"
wait_for "kana あしたはともだちとこうえんにいきます"
mkdir -p experiments/results/ime
tmux capture-pane -p -t "$name" > experiments/results/ime/screen.txt
cat experiments/results/ime/screen.txt
