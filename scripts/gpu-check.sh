#!/usr/bin/env bash
# The one prepared device check (issue 8): builds the CUDA targets for sm_90, runs the GPU tests
# (kernels against their CPU references, the CUPTI tracer on real launches), and writes every
# result under $OUT: GPU tests, a CUPTI-profiled engine decode of the tiny model and of a
# random-weight model in SmolLM-360M MoR-3 shapes, calibration from those traces, validation,
# and the GPU benchmarks. Sized for one device call of well under 6 minutes on an H200.
#
# The device image has CUDA, CMake and ninja but none of the Debian libraries the build needs
# (Eigen, GoogleTest, yaml-cpp, fmt, ...), and it cannot download. So, on this machine first:
#   scripts/gpu-check.sh --prepare        # fetches the .debs into .gpu-deps/ (git-ignored)
# then one device call, carrying them:
#   run(command="scripts/gpu-check.sh", carry=[".gpu-deps"], timeout_s=480)
# The packages are unpacked under /opt/exitsim-deps, never over /, and found through
# CMAKE_PREFIX_PATH and LD_LIBRARY_PATH.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(libeigen3-dev libboost1.74-dev libboost-graph1.74-dev libboost-graph1.74.0
          libboost-regex1.74-dev libboost-serialization1.74-dev libgtest-dev libgmock-dev
          libbenchmark-dev libbenchmark1debian libyaml-cpp-dev libyaml-cpp0.7 nlohmann-json3-dev
          libcli11-dev libfmt-dev libfmt9 libsqlite3-dev libsqlite3-0)

if [ "${1:-}" = "--prepare" ]; then
  grep -qx '/.gpu-deps/' .git/info/exclude 2>/dev/null || echo '/.gpu-deps/' >> .git/info/exclude
  mkdir -p .gpu-deps
  (cd .gpu-deps && apt-get download "${packages[@]}")
  du -sh .gpu-deps
  exit 0
fi

out=${OUT:-out/gpu-check}
mkdir -p "$out"
exec > >(tee "$out/gpu-check.log") 2>&1
start=$(date +%s)
step() { echo; echo "== $* ($(( $(date +%s) - start )) s)"; }

step "machine"
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv || true
nvcc --version | tail -1

deps=/opt/exitsim-deps
if [ -d .gpu-deps ]; then
  step "unpack the carried packages under $deps"
  mkdir -p "$deps"
  for deb in .gpu-deps/*.deb; do dpkg -x "$deb" "$deps"; done
  export CMAKE_PREFIX_PATH="$deps/usr:$deps/usr/lib/x86_64-linux-gnu/cmake:${CMAKE_PREFIX_PATH:-}"
  export LD_LIBRARY_PATH="$deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
  export CPATH="$deps/usr/include:$deps/usr/include/eigen3:${CPATH:-}"
fi

step "configure and build for sm_90"
cmake -S . -B build/gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DEXITSIM_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES=90
ninja -C build/gpu kernels_tests profiler_tests exitsim engine_cuda_bench

step "GPU tests: every kernel against its CPU reference; CUPTI on real launches"
set +e
build/gpu/bin/kernels_tests --gtest_output="xml:$out/kernels_tests.xml"
kernels_rc=$?
build/gpu/bin/profiler_tests --gtest_output="xml:$out/profiler_tests.xml"
profiler_rc=$?
set -e

exitsim=build/gpu/bin/exitsim
model=models/tiny-recursive
workload=(--set workload.requests=64 --set workload.arrivals.rate=200
          --set 'workload.input_tokens={dist: lognormal, mean: 96, sigma: 0.6, min: 16, max: 192}'
          --set 'workload.output_tokens={dist: lognormal, mean: 40, sigma: 0.5, min: 4, max: 64}'
          --set scheduler.max_running=64 --set exit_policy.kind=distribution
          --set 'exit_policy.probabilities=[0.4, 0.3, 0.2, 0.1]')
set +e
step "profiled GPU decode of the tiny model (CUPTI), two seeds per strategy"
for strategy in full_depth state_copy depthwise; do
  for seed in 1 3; do
    "$exitsim" engine run --backend cuda --model $model --text $model/held_out.txt "${workload[@]}" \
      --honour-arrivals --set seed=$seed --set sync.strategy=$strategy \
      --out "$out/tiny/$strategy-$seed" --profile "$out/tiny/profile-$strategy-$seed"
  done
done
step "calibrate from the GPU traces, validate on other requests"
"$exitsim" calibrate "$out"/tiny/profile-*/op_trace.csv -o "$out/gpu_cost_profile.json"
"$exitsim" validate --backend cuda --model $model --text $model/held_out.txt "${workload[@]}" \
  --set seed=2 --profile "$out/gpu_cost_profile.json" \
  --strategies full_depth,state_copy,depthwise -o "$out/validation"
step "profiled GPU decode of a random-weight model in SmolLM-360M MoR-3 shapes"
"$exitsim" engine random-model -o build/gpu/mor360 --like mor-smollm-360m-r3
"$exitsim" engine run --backend cuda --model build/gpu/mor360 --token-ids <(seq 1 4000 | tr '\n' ' ') \
  --set workload.requests=32 --set scheduler.max_running=32 --set sync.strategy=depthwise \
  --set 'workload.input_tokens={dist: fixed, value: 128}' \
  --set 'workload.output_tokens={dist: fixed, value: 64}' \
  --set exit_policy.kind=distribution --set 'exit_policy.probabilities=[0.5, 0.3, 0.2]' \
  --out "$out/mor360" --profile "$out/mor360/profile"
step "the same decode in bf16 storage"
"$exitsim" engine run --backend cuda --dtype bf16 --model build/gpu/mor360 \
  --token-ids <(seq 1 4000 | tr '\n' ' ') \
  --set workload.requests=32 --set scheduler.max_running=32 --set sync.strategy=depthwise \
  --set 'workload.input_tokens={dist: fixed, value: 128}' \
  --set 'workload.output_tokens={dist: fixed, value: 64}' \
  --set exit_policy.kind=distribution --set 'exit_policy.probabilities=[0.5, 0.3, 0.2]' \
  --out "$out/mor360-bf16"
step "GPU benchmarks"
build/gpu/bin/engine_cuda_bench --benchmark_out="$out/engine_cuda_bench.json" \
  --benchmark_out_format=json
set -e
# Only eight files come back from a device call: keep the ones worth reading on top.
cp "$out"/validation/validation.csv "$out/" 2>/dev/null || true
tar czf "$out/traces.tgz" -C "$out" tiny mor360 mor360-bf16 2>/dev/null || true

step "done"
echo "kernels_tests rc $kernels_rc, profiler_tests rc $profiler_rc; results in $out"
[ "$kernels_rc" -eq 0 ] && [ "$profiler_rc" -eq 0 ]
