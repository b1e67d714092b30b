#!/usr/bin/env bash
# Regenerates the Hugging Face Kineto traces (training/hf_kineto_traces.py: the real transformers
# model code of Llama-3, Qwen3, Gemma-2 and Mixtral configs on the CPU) and reads each back with
# `exitsim calibrate --kineto`, printing the model line it recovers or the reason it refuses.
# Opt-in, not a ctest: it needs PyTorch and transformers and takes minutes; the test suite reads
# the committed traces (tests/analysis/data/kineto/hf) without Python.
#
# Usage: training/hf_kineto_smoke.sh EXITSIM_BINARY [--quick] [OUT_DIR]
#   --quick   two tiny steps per trace, into a scratch folder unless OUT_DIR is given (a check of
#             the script, not fixtures)
#   OUT_DIR   where the traces go (default: tests/analysis/data/kineto/hf, the committed ones)
#   $PYTHON   an interpreter with torch and transformers (default: python3)
# Exit 77 (skipped) when $PYTHON lacks them; non-zero when the generator fails.
set -euo pipefail
exitsim=$1
shift
out=
quick=()
for arg in "$@"; do
  case $arg in
    --quick) quick=(--quick --repeats 1) ;;
    *) out=$arg ;;
  esac
done
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
if [[ -z $out && ${#quick[@]} -gt 0 ]]; then
  out=$scratch/traces
elif [[ -z $out ]]; then
  out=$(dirname "$0")/../tests/analysis/data/kineto/hf
fi
python=${PYTHON:-python3}
if ! "$python" -c 'import torch, transformers' 2>/dev/null; then
  echo "skipped: $python cannot import torch and transformers (set PYTHON)"
  exit 77
fi
"$python" "$(dirname "$0")/hf_kineto_traces.py" --out "$out" "${quick[@]}"
profile=$scratch/profile.json
for trace in "$out"/*.kineto.json.gz; do
  # A refusal (a model the importer cannot read, a busy machine's timings) is reported, not fatal.
  line=$("$exitsim" calibrate --kineto "$trace" -o "$profile" --force 2>&1 |
    grep -E '^model |error:' | head -1) || true
  echo "$(basename "$trace"): ${line:-no model line}"
done
