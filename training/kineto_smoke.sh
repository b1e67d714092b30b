#!/usr/bin/env bash
# CI's check of training/kineto_traces.py: a few steps of the tiny model under torch.profiler,
# then `exitsim calibrate --kineto` must read them and recover the model's shape. Skipped (exit
# code 77, which ctest reports as skipped) when Debian's python3-torch is missing; the import
# itself is tested on committed traces (tests/analysis/kineto_test.cpp) without Python.
# Usage: training/kineto_smoke.sh EXITSIM_BINARY
set -euo pipefail
exitsim=$1
if ! /usr/bin/python3 -c 'import torch' 2>/dev/null; then
  echo "skipped: python3-torch is not installed (apt-get install python3-torch)"
  exit 77
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
/usr/bin/python3 "$(dirname "$0")/kineto_traces.py" --model tiny --quick --repeats 1 --out "$out"
"$exitsim" calibrate --kineto "$out/tiny.kineto.json.gz" -o "$out/profile.json" --force \
  | tee "$out/calibrate.log"
grep -q "d192 h6/2x32 ffn512 v256 gated depth 1+1x4+1 lora - (6 steps mapped, 2 of them prefill" \
  "$out/calibrate.log"
echo "ok: the tiny model's shape and all 6 steps recovered from a fresh trace"
