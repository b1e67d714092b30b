#!/usr/bin/env bash
# The one prepared device check (issue 8): builds the CUDA targets for sm_90, runs the GPU tests
# (kernels against their CPU references, the CUPTI tracer on real launches), and writes every
# result under $OUT. Sized for one device call of well under 6 minutes on an H200.
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

step "configure and build for sm_90 (kernels and profiler tests)"
cmake -S . -B build/gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DEXITSIM_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES=90 -DEXITSIM_BUILD_BENCH=OFF
ninja -C build/gpu kernels_tests profiler_tests

step "GPU tests: every kernel against its CPU reference; CUPTI on real launches"
set +e
build/gpu/bin/kernels_tests --gtest_output="xml:$out/kernels_tests.xml"
kernels_rc=$?
build/gpu/bin/profiler_tests --gtest_output="xml:$out/profiler_tests.xml"
profiler_rc=$?
set -e

step "done"
echo "kernels_tests rc $kernels_rc, profiler_tests rc $profiler_rc; results in $out"
[ "$kernels_rc" -eq 0 ] && [ "$profiler_rc" -eq 0 ]
