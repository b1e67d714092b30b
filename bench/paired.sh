#!/usr/bin/env bash
# Whole-process timings of two commands, run alternately (A B A B ...) so that a machine's slow
# spells hit both alike: prints each one's median and min-max wall time, the ratio of the medians
# and the spread of the per-pair ratios B/A. For figures whose baseline must run in the same
# session (the README's "Performance" table).
#
#   bench/paired.sh RUNS 'COMMAND A' 'COMMAND B'
#
# Example (today's binary against another build of exitsim):
#   bench/paired.sh 7 '/tmp/main/build/release/bin/exitsim --version' 'build/release/bin/exitsim --version'
set -euo pipefail
runs=${1:?runs}
a=${2:?command A}
b=${3:?command B}
now_ns() { date +%s%N; }
time_once() {
  local start end
  start=$(now_ns)
  bash -c "$1" > /dev/null 2>&1
  end=$(now_ns)
  echo $(( (end - start) / 1000 ))  # microseconds
}
bash -c "$a" > /dev/null 2>&1  # warm-up: page cache, first-touch
bash -c "$b" > /dev/null 2>&1
ta=(); tb=()
for ((i = 0; i < runs; i++)); do
  ta+=("$(time_once "$a")")
  tb+=("$(time_once "$b")")
done
summary() {  # median min max, in ms
  printf '%s\n' "$@" | sort -n | awk '{v[NR] = $1} END {
    m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2;
    printf "%.1f %.1f %.1f", m / 1000, v[1] / 1000, v[NR] / 1000 }'
}
read -r ma mina maxa <<< "$(summary "${ta[@]}")"
read -r mb minb maxb <<< "$(summary "${tb[@]}")"
ratios=()
for ((i = 0; i < runs; i++)); do
  ratios+=("$(awk -v x="${tb[$i]}" -v y="${ta[$i]}" 'BEGIN {printf "%.4f", x / y}')")
done
read -r rmed rmin rmax <<< "$(printf '%s\n' "${ratios[@]}" | sort -n | awk '{v[NR] = $1} END {
  m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "%.3f %.3f %.3f", m, v[1], v[NR] }')"
echo "A  median ${ma} ms (${mina}-${maxa}), ${runs} runs: $a"
echo "B  median ${mb} ms (${minb}-${maxb}), ${runs} runs: $b"
echo "B/A  ratio of medians $(awk -v x="$mb" -v y="$ma" 'BEGIN {printf "%.3f", x / y}'); per-pair ratios median ${rmed} (${rmin}-${rmax})"
