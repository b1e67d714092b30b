// CPU engine speed, as ratios within one run:
//   - prefill: the engine's linear layers on a 512-token prompt chunk against Eigen's own GEMM on
//     the same shapes (target: at least 60%);
//   - decode tokens/s per synchronization strategy at batch 1, 8 and 32 on a model too big for
//     the caches (random weights in the shape of Mixture-of-Recursions on SmolLM-135M, three
//     recursions: ~0.3 GB in fp32), so that decode is memory-bound as on a GPU;
//   - the cost of profiling: the same decode with the host profiler recording every op.
//
//   build/release/bin/engine_bench
#include <benchmark/benchmark.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "decode_workload.hpp"
#include "exitsim/core/presets.hpp"
#include "exitsim/engine/cpu_model.hpp"
#include "exitsim/engine/engine.hpp"
#include "exitsim/engine/linear.hpp"
#include "exitsim/engine/model_weights.hpp"

namespace {

using namespace exitsim;

struct Model {
  engine::ModelConfig config;
  engine::ModelWeights weights;
  std::unique_ptr<engine::CpuModel> cpu;

  explicit Model(const std::string& preset) {
    config.shape = *find_model_preset(preset);
    config.shape.dtype = DType::fp32;
    config.routers = true;
    weights = engine::random_model_weights(config, 1);
    cpu = std::make_unique<engine::CpuModel>(config, weights);
  }
};

const Model& mor135() {
  static const Model m("mor-smollm-135m-r3");
  return m;
}

// The linear layers of one unique layer on a prompt chunk: the engine's path and Eigen's GEMM.
void prefill_linears(benchmark::State& state, bool engine_path) {
  const Model& m = mor135();
  const engine::LayerWeights& w = m.weights.layers[1];
  const std::vector<const engine::Matrix*> linears = {&w.wq,     &w.wk,   &w.wv,    &w.wo,
                                                      &w.w_gate, &w.w_up, &w.w_down};
  const Eigen::Index tokens = 512;
  std::vector<engine::Matrix> inputs;
  for (const engine::Matrix* l : linears)
    inputs.push_back(engine::Matrix::Random(tokens, l->cols()));
  const std::vector<engine::RowRange> chunk = {{0, tokens}};
  engine::Matrix y;
  double flops = 0;
  for (auto _ : state) {
    flops = 0;
    for (std::size_t i = 0; i < linears.size(); ++i) {
      if (engine_path) {
        engine::linear_rows(*linears[i], inputs[i], chunk, y);
      } else {
        y.noalias() = inputs[i] * linears[i]->transpose();
      }
      benchmark::DoNotOptimize(y.data());
      flops += 2.0 * static_cast<double>(tokens * linears[i]->rows() * linears[i]->cols());
    }
  }
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops / 1e9, benchmark::Counter::kIsIterationInvariantRate);
}

void decode(benchmark::State& state, const std::string& strategy, bool exits, bool profile) {
  const Model& m = mor135();
  const int batch = static_cast<int>(state.range(0));
  const engine::EngineOptions options = bench::decode_options(strategy, exits, batch);
  const std::vector<engine::EngineRequest> work = bench::decode_requests(batch, 8, 24);
  double decode_tokens = 0;
  double decode_seconds = 0;
  std::size_t ops = 0;
  for (auto _ : state) {
    profiler::HostProfiler profiler(profiler::HostProfilerOptions{.enabled = profile});
    engine::Engine engine(*m.cpu, options, profile ? &profiler : nullptr);
    const engine::EngineRun run = engine.run(work);
    const bench::DecodeShare share = bench::decode_share(run, batch);
    decode_tokens += share.tokens;
    decode_seconds += share.seconds;
    ops = profiler.size();
  }
  state.counters["decode_tokens/s"] = decode_tokens / decode_seconds;
  state.counters["ops"] = static_cast<double>(ops);
}

BENCHMARK_CAPTURE(prefill_linears, eigen_gemm, false)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(prefill_linears, engine, true)->Unit(benchmark::kMillisecond);
#define EXITSIM_DECODE(name, strategy, exits)                          \
  BENCHMARK_CAPTURE(decode, name, std::string(strategy), exits, false) \
      ->Arg(1)                                                         \
      ->Arg(8)                                                         \
      ->Arg(32)                                                        \
      ->Iterations(1)                                                  \
      ->Unit(benchmark::kMillisecond)
EXITSIM_DECODE(full_depth, "full_depth", false);
EXITSIM_DECODE(batch_sync, "batch_sync", true);
EXITSIM_DECODE(state_copy, "state_copy", true);
EXITSIM_DECODE(deferred_fill, "deferred_fill", true);
EXITSIM_DECODE(skip_kv, "skip_kv", true);
EXITSIM_DECODE(depthwise, "depthwise", true);
BENCHMARK_CAPTURE(decode, full_depth_profiled, std::string("full_depth"), false, true)
    ->Arg(8)
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(decode, full_depth_unprofiled, std::string("full_depth"), false, false)
    ->Arg(8)
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
