#!/usr/bin/env bash
# Prints the folder of a shipped model as it was in f32, with the heads it had: the model the
# results files were measured on. assets/models ships these models with int8 vocabulary rows
# (issue 36 item 11); their f32 weights stay in the git history, extracted once to
# runs/f32-NAME-REV.
#
#   MODEL=$(bash experiments/f32_model.sh ptb-small-lstm)     # f32 until git 36fe1e3
#   MODEL=$(bash experiments/f32_model.sh bible-en-de-tiny)   # f32 until git c7f367a
set -euo pipefail
cd "$(dirname "$0")/.."
NAME=${1:?name a shipped model: ptb-small-lstm or bible-en-de-tiny}
case $NAME in
  ptb-small-lstm) REV=${PTB_F32_REV:-36fe1e3} ;;
  bible-en-de-tiny) REV=${BIBLE_F32_REV:-c7f367a} ;;
  *) echo "no f32 revision is recorded for $NAME: name ptb-small-lstm or bible-en-de-tiny" >&2; exit 1 ;;
esac
DIR=runs/f32-$NAME-$REV
if [ ! -f "$DIR/manifest.json" ]; then
  git cat-file -e "$REV^{commit}" 2>/dev/null || {
    echo "git revision $REV (the f32 $NAME) is not in this clone: clone with full history, or pass MODEL" >&2
    exit 1
  }
  rm -rf "$DIR" && mkdir -p "$DIR"
  git archive "$REV" "assets/models/$NAME" | tar -x -C "$DIR" --strip-components=3
fi
echo "$DIR"
