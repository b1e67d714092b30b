#!/usr/bin/env bash
# The whole-process figures of the README's "Performance" table, each against a baseline build
# of exitsim in the same session (alternating runs, bench/paired.sh): start-up, the Azure
# conversation replay, the main job's sweep; and the resident memory of start-up and of 20 k vs
# 10 M simulated requests.
#
#   bench/whole_process.sh BASELINE_EXITSIM [RUNS]
#
# The baseline is usually main before a change, built beside the working tree:
#   git worktree add /tmp/base main && (cd /tmp/base && cmake --preset release && cmake --build --preset release)
#   bench/whole_process.sh /tmp/base/build/release/bin/exitsim 7
# The replay needs the public traces ($EXITSIM_TRACES, else ../shared/traces); it is skipped without.
# Each timed run starts a bash first (about 3 ms on the project's VM), in both columns alike.
set -euo pipefail
cd "$(dirname "$0")/.."
base=${1:?baseline exitsim binary}
runs=${2:-7}
new=build/release/bin/exitsim
export EXITSIM_TRACES=${EXITSIM_TRACES:-$(cd .. && pwd)/shared/traces}
paired=bench/paired.sh

echo "== start-up: --version"
$paired "$runs" "$base --version" "$new --version"
echo "== the default scenario, no output files"
$paired "$runs" "$base simulate --no-output -q" "$new simulate --no-output -q"
if [ -f "$EXITSIM_TRACES/azure_llm_2023_conv.csv" ]; then
  echo "== Azure conversation replay (bench/scenarios/azure_conv_chunked.yaml)"
  scenario=bench/scenarios/azure_conv_chunked.yaml
  $paired "$runs" "$base simulate $scenario --no-output -q" "$new simulate $scenario --no-output -q"
else
  echo "== Azure conversation replay: skipped, no $EXITSIM_TRACES/azure_llm_2023_conv.csv"
fi
echo "== the main job's sweep (scenarios/examples/pipeline_tiny_cpu.yaml, 60 points, 1 job)"
db=$(mktemp -d)
trap 'rm -rf "$db"' EXIT
sweep=scenarios/examples/pipeline_tiny_cpu.yaml
$paired "$runs" "rm -f $db/a.db; $base sweep $sweep --db $db/a.db -j 1 -q" \
  "rm -f $db/b.db; $new sweep $sweep --db $db/b.db -j 1 -q"

echo "== resident memory (maximum, KiB)"
for binary in "$base" "$new"; do
  version=$(/usr/bin/time -f %M "$binary" --version 2>&1 >/dev/null)
  default=$(/usr/bin/time -f %M "$binary" simulate --no-output -q 2>&1 >/dev/null | tail -1)
  echo "$binary: --version $version, simulate (default scenario) $default"
done
synthetic=(--no-output -q --set workload.arrivals.rate=400 --set cluster.replicas=2
  --set 'workload.input_tokens={dist: fixed, value: 128}'
  --set 'workload.output_tokens={dist: uniform, min: 4, max: 16}')
for n in 20000 10000000; do
  memory=$(/usr/bin/time -f "%M KiB, %e s" "$new" simulate "${synthetic[@]}" \
    --set workload.requests=$n 2>&1 >/dev/null | tail -1)
  echo "$new: $n synthetic requests: $memory"
done
