// CPU engine speed: decode throughput per synchronization strategy, and the cost of profiling
// (the same decode with the host profiler recording every op against it switched off).
//
//   build/release/bin/engine_bench
//
// Model: random weights in the shape of the tiny recursive model the project ships (d 192,
// 6 heads over 2 K/V heads, SwiGLU 512, byte vocabulary; 1 prelude layer, a 1-layer block
// applied 4 times, 1 coda layer). Workload: 16 requests, 64-token prompts, 64 output tokens.
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "exitsim/engine/engine.hpp"
#include "exitsim/engine/model_weights.hpp"

namespace {

using namespace exitsim;

struct Fixture {
  engine::ModelConfig config;
  engine::ModelWeights weights;
  std::unique_ptr<engine::CpuModel> model;
  std::vector<engine::EngineRequest> requests;

  Fixture() {
    config.shape.name = "bench-tiny-recursive";
    config.shape.d_model = 192;
    config.shape.n_heads = 6;
    config.shape.n_kv_heads = 2;
    config.shape.head_dim = 32;
    config.shape.ffn_dim = 512;
    config.shape.vocab = 260;
    config.shape.dtype = DType::fp32;
    config.shape.tied_embeddings = true;
    config.shape.depth.prelude_layers = 1;
    config.shape.depth.block_layers = 1;
    config.shape.depth.recursions = 4;
    config.shape.depth.coda_layers = 1;
    config.routers = true;
    weights = engine::random_model_weights(config, 1);
    model = std::make_unique<engine::CpuModel>(config, weights);
    for (int i = 0; i < 16; ++i) {
      engine::EngineRequest r;
      r.id = RequestId(static_cast<std::uint64_t>(i));
      for (int t = 0; t < 64; ++t)
        r.prompt.push_back(static_cast<std::int32_t>((31 * t + 7 * i) % 256));
      r.output_tokens = 64;
      requests.push_back(r);
    }
  }
};

const Fixture& fixture() {
  static const Fixture f;
  return f;
}

void decode(benchmark::State& state, const std::string& strategy, bool profile) {
  const Fixture& f = fixture();
  engine::EngineOptions options;
  options.strategy = *policy::parse_sync_strategy(strategy);
  if (strategy != "full_depth") {
    options.exit_policy.kind = "distribution";
    options.exit_policy.probabilities = {0.4, 0.3, 0.2, 0.1};
  }
  options.limits.max_running = 16;
  options.kv_blocks = 16 * 9;
  std::int64_t tokens = 0;
  std::size_t ops = 0;
  for (auto _ : state) {
    profiler::HostProfiler profiler(profiler::HostProfilerOptions{.enabled = profile});
    engine::Engine engine(*f.model, options, profile ? &profiler : nullptr);
    const engine::EngineRun run = engine.run(f.requests);
    tokens = static_cast<std::int64_t>(run.tokens.size());
    ops = profiler.size();
  }
  state.counters["tokens/s"] = benchmark::Counter(static_cast<double>(tokens),
                                                  benchmark::Counter::kIsIterationInvariantRate);
  state.counters["ops"] = static_cast<double>(ops);
}

BENCHMARK_CAPTURE(decode, full_depth, std::string("full_depth"), false)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(decode, full_depth_profiled, std::string("full_depth"), true)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(decode, state_copy, std::string("state_copy"), false)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(decode, skip_kv, std::string("skip_kv"), false)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(decode, deferred_fill, std::string("deferred_fill"), false)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(decode, depthwise, std::string("depthwise"), false)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(decode, depthwise_profiled, std::string("depthwise"), true)
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
