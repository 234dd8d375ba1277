#!/usr/bin/env bash
# Prints the folder of the f32 English → German translator that the Bible results were measured
# on, with the heads it had. assets/models/bible-en-de-tiny ships the same model as int8 with its
# vocabulary map (issue 36 item 11); its f32 weights stay in the git history at BIBLE_F32_REV,
# extracted once to runs/bible-f32-REV.
#
#   MODEL=$(bash experiments/bible_f32.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
REV=${BIBLE_F32_REV:-c7f367a}
DIR=runs/bible-f32-$REV
if [ ! -f "$DIR/manifest.json" ]; then
  git cat-file -e "$REV^{commit}" 2>/dev/null || {
    echo "git revision $REV (the f32 Bible translator) is not in this clone: clone with full history, or pass MODEL" >&2
    exit 1
  }
  rm -rf "$DIR" && mkdir -p "$DIR"
  git archive "$REV" assets/models/bible-en-de-tiny | tar -x -C "$DIR" --strip-components=3
fi
echo "$DIR"
