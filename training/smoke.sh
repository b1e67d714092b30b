#!/usr/bin/env bash
# CI's check of the training script: three steps on the real corpus, no export. Skipped (exit
# code 77, which ctest reports as skipped) when Debian's python3-torch or bible-kjv is missing.
set -euo pipefail
if ! /usr/bin/python3 -c 'import torch' 2>/dev/null; then
  echo "skipped: python3-torch is not installed (apt-get install python3-torch libopenblas0-openmp)"
  exit 77
fi
if ! command -v bible >/dev/null; then
  echo "skipped: the corpus needs bible-kjv (apt-get install bible-kjv bible-kjv-text)"
  exit 77
fi
exec /usr/bin/python3 "$(dirname "$0")/train_tiny.py" --smoke
