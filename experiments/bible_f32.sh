#!/usr/bin/env bash
# Prints the folder of the f32 English → German translator that the Bible results were measured
# on (experiments/f32_model.sh bible-en-de-tiny).
#
#   MODEL=$(bash experiments/bible_f32.sh)
exec bash "$(dirname "$0")/f32_model.sh" bible-en-de-tiny
