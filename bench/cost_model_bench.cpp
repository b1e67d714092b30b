// Cost-model speed: the simulator prices every iteration, about 600k per replayed hour, so
// iteration_cost must stay in the low hundreds of nanoseconds.
//
//   build/release/bin/cost_model_bench
//
// Reports ns per iteration_cost call for decode batches of 1, 16 and 256, a mixed prefill batch,
// a mixed-depth batch and the work of the synchronization strategies (batch_sync's masked
// riders, deferred_fill's pending tokens, state_copy's K/V-only layers, skip_kv's per-recursion
// contexts, depth-wise batching's recursions folded onto the first), against a baseline in the same
// run: one pass summing the batch's tokens (the floor any per-entry pricing pays). The calibrated
// model prices decode batches from a profile of linear fits at TP 1, TP 4 (two all-reduces a layer)
// and TP 4 x PP 2 (the micro-batch schedule).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "exitsim/core/presets.hpp"
#include "exitsim/sim/cost/calibrated_cost_model.hpp"
#include "exitsim/sim/cost/roofline.hpp"
#include "exitsim/traces/engine_ops.hpp"

namespace {

using exitsim::sim::BatchEntry;
using exitsim::sim::CalibratedCostModel;
using exitsim::sim::RooflineCostModel;

const RooflineCostModel& llama_on_h100() {
  static const RooflineCostModel model(*exitsim::find_model_preset("llama-3-8b"),
                                       *exitsim::find_hardware_preset("h100-sxm"), {0.7, 0.85});
  return model;
}

// The same model on one replica of 8 H100s: every layer gains two all-reduces on a second
// stream, which takes the graph walk off its one-stream fast path.
const RooflineCostModel& llama_on_8_h100() {
  static const RooflineCostModel model(*exitsim::find_model_preset("llama-3-8b"),
                                       *exitsim::find_hardware_preset("h100-sxm"), {0.7, 0.85},
                                       exitsim::ParallelSpec{8});
  return model;
}

// Eight H100s as TP 2 x PP 4: every call splits the batch into up to four micro-batches and prices
// each on each stage.
const RooflineCostModel& llama_on_4_stages() {
  static const RooflineCostModel model(*exitsim::find_model_preset("llama-3-8b"),
                                       *exitsim::find_hardware_preset("h100-sxm"), {0.7, 0.85},
                                       exitsim::ParallelSpec{2, 4});
  return model;
}

const RooflineCostModel& recursive_on_h100() {
  static const RooflineCostModel model = [] {
    exitsim::ModelShape m = *exitsim::find_model_preset("llama-3-8b");
    m.depth = exitsim::DepthStructure::middle_cycle(32, 3);
    m.depth.lora_rank = {0, 16, 16};
    return RooflineCostModel(m, *exitsim::find_hardware_preset("h100-sxm"), {0.7, 0.85});
  }();
  return model;
}

// A profile of Llama-3-8B measured at `tp`: every op 1 us + 0.1 us a token, attention also
// 0.001 us a (query, key) pair, with the TP and PP collectives.
exitsim::sim::CostProfile linear_profile(int tp) {
  namespace ops = exitsim::traces::engine_ops;
  const exitsim::ModelShape m = *exitsim::find_model_preset("llama-3-8b");
  exitsim::sim::CostProfile p;
  p.source = {"bench", "cuda", "h100-sxm", m.name, exitsim::sim::model_fingerprint(m), {}};
  p.source.tensor_parallel = tp;
  std::vector<std::string_view> names(ops::layer.begin(), ops::layer.end());
  for (const std::string_view name : {ops::embed, ops::lm_head, ops::sampling, ops::kv_only,
                                      ops::tp_all_reduce, ops::pp_send_recv})
    names.push_back(name);
  for (const std::string_view name : names) {
    exitsim::sim::OpFit fit;
    fit.name = std::string(name);
    fit.kind = name == ops::attention ? "attention" : "gemm";
    fit.regimes = {{1 << 20, {1, 0.1, name == ops::attention ? 0.001 : 0, 0}}};
    fit.batch_min_seen = 1;
    fit.batch_max_seen = 1 << 20;
    p.ops.push_back(fit);
  }
  std::sort(p.ops.begin(), p.ops.end(),
            [](const auto& a, const auto& b) { return a.name < b.name; });
  return p;
}

const CalibratedCostModel& calibrated(int tp, int pp) {
  const auto make = [](int t, int s) {
    return CalibratedCostModel(linear_profile(t), "bench",
                               *exitsim::find_model_preset("llama-3-8b"),
                               {{t, s, 1}, *exitsim::find_hardware_preset("h100-sxm"), {}});
  };
  static const CalibratedCostModel one = make(1, 1);
  static const CalibratedCostModel four = make(4, 1);
  static const CalibratedCostModel staged = make(4, 2);
  return tp == 1 ? one : pp == 1 ? four : staged;
}

// Decode entries with contexts spread over a few thousand tokens.
std::vector<BatchEntry> decode_batch(std::int64_t size, int depth = 32) {
  std::vector<BatchEntry> batch;
  for (std::int64_t i = 0; i < size; ++i)
    batch.push_back({1, 200 + (i * 397) % 3000, depth, true});
  return batch;
}

// Chunked prefill: one 512-token chunk, a finished 200-token prompt, 62 decodes.
std::vector<BatchEntry> mixed_prefill_batch() {
  std::vector<BatchEntry> batch = decode_batch(62);
  batch.push_back({512, 1024, 32, false});
  batch.push_back({200, 0, 32, true});
  return batch;
}

// Early exit on the recursive model: 64 decodes spread over its three exit points.
std::vector<BatchEntry> mixed_depth_batch() {
  std::vector<BatchEntry> batch = decode_batch(64);
  for (std::size_t i = 0; i < batch.size(); ++i)
    batch[i].depth = 11 + 10 * static_cast<int>(i % 3);
  return batch;
}

// batch_sync: 64 decodes all run to the batch's deepest exit, each useful to its own exit point.
std::vector<BatchEntry> batch_sync_batch() {
  std::vector<BatchEntry> batch = decode_batch(64);
  for (std::size_t i = 0; i < batch.size(); ++i)
    batch[i].useful_depth = 8 + 8 * static_cast<int>(i % 4);
  return batch;
}

// deferred_fill: 64 decodes, a quarter at the shallow exit, a quarter going deep with 4 pending
// hidden states joining them from the shallow exit.
std::vector<BatchEntry> deferred_fill_batch() {
  std::vector<BatchEntry> batch = decode_batch(64);
  for (std::size_t i = 0; i < batch.size(); ++i) {
    if (i % 4 == 1)
      batch[i].depth = 8;
    if (i % 4 == 2) {
      batch[i].pending_tokens = 4;
      batch[i].pending_from_depth = 8;
    }
  }
  return batch;
}

// state_copy: 64 decodes, half exiting at 8 or 16 and computing K/V only above their exit.
std::vector<BatchEntry> state_copy_batch() {
  std::vector<BatchEntry> batch = decode_batch(64);
  for (std::size_t i = 0; i < batch.size(); ++i) {
    if (i % 2 == 1) {
      batch[i].depth = 8 + 8 * static_cast<int>(i % 4 / 2);
      batch[i].kv_only_depth = 32;
    }
  }
  return batch;
}

// skip_kv on the recursive model: 64 decodes over its exit points, attending over shorter
// contexts at deeper recursions.
std::vector<BatchEntry> skip_kv_batch() {
  std::vector<BatchEntry> batch = mixed_depth_batch();
  for (BatchEntry& e : batch) {
    e.recursion_context_count = 3;
    const auto c = static_cast<std::int32_t>(e.context_tokens);
    e.recursion_context = {c, c / 2, c / 4};
  }
  return batch;
}

// Depth-wise batching on the recursive model (prelude 1, block 10 x 3, coda 1): 64 decodes in
// the shared block, each at one of its recursions (recursion r priced as recursion 1's layers
// with its own context), every eighth a token that left the block and runs the coda and head.
std::vector<BatchEntry> depthwise_batch() {
  std::vector<BatchEntry> batch = decode_batch(64, 11);
  for (std::size_t i = 0; i < batch.size(); ++i) {
    BatchEntry& e = batch[i];
    const int recursion = 1 + static_cast<int>(i % 3);
    e.start_depth = recursion == 1 ? 0 : 1;
    e.coda = BatchEntry::Coda::skip;
    e.recursion_context_count = 1;
    e.recursion_context[0] = static_cast<std::int32_t>(e.context_tokens / recursion);
    if (i % 8 == 7) {
      e.start_depth = 31;
      e.coda = BatchEntry::Coda::run;
    }
  }
  return batch;
}

void report(benchmark::State& state) {
  state.SetItemsProcessed(state.iterations());
  state.counters["ns_per_call"] =
      benchmark::Counter(static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

void baseline_sum_tokens(benchmark::State& state) {
  const std::vector<BatchEntry> batch = decode_batch(state.range(0));
  for (auto _ : state) {
    std::int64_t tokens = 0;
    for (const BatchEntry& e : batch)
      tokens += e.query_tokens + e.context_tokens;
    benchmark::DoNotOptimize(tokens);
  }
  report(state);
}
BENCHMARK(baseline_sum_tokens)->Arg(1)->Arg(16)->Arg(256);

void decode(benchmark::State& state) {
  const std::vector<BatchEntry> batch = decode_batch(state.range(0));
  for (auto _ : state)
    benchmark::DoNotOptimize(llama_on_h100().iteration_cost(batch));
  report(state);
}
BENCHMARK(decode)->Arg(1)->Arg(16)->Arg(256);

void decode_tp8(benchmark::State& state) {
  const std::vector<BatchEntry> batch = decode_batch(state.range(0));
  for (auto _ : state)
    benchmark::DoNotOptimize(llama_on_8_h100().iteration_cost(batch));
  report(state);
}
BENCHMARK(decode_tp8)->Arg(1)->Arg(16)->Arg(256);

void decode_tp2_pp4(benchmark::State& state) {
  const std::vector<BatchEntry> batch = decode_batch(state.range(0));
  for (auto _ : state)
    benchmark::DoNotOptimize(llama_on_4_stages().iteration_cost(batch));
  report(state);
}
BENCHMARK(decode_tp2_pp4)->Arg(1)->Arg(16)->Arg(256);

void mixed_prefill(benchmark::State& state) {
  const std::vector<BatchEntry> batch = mixed_prefill_batch();
  for (auto _ : state)
    benchmark::DoNotOptimize(llama_on_h100().iteration_cost(batch));
  report(state);
}
BENCHMARK(mixed_prefill);

void mixed_depth_recursive(benchmark::State& state) {
  const std::vector<BatchEntry> batch = mixed_depth_batch();
  for (auto _ : state)
    benchmark::DoNotOptimize(recursive_on_h100().iteration_cost(batch));
  report(state);
}
BENCHMARK(mixed_depth_recursive);

void batch_sync(benchmark::State& state) {
  const std::vector<BatchEntry> batch = batch_sync_batch();
  for (auto _ : state)
    benchmark::DoNotOptimize(llama_on_h100().iteration_cost(batch));
  report(state);
}
BENCHMARK(batch_sync);

void deferred_fill(benchmark::State& state) {
  const std::vector<BatchEntry> batch = deferred_fill_batch();
  for (auto _ : state)
    benchmark::DoNotOptimize(llama_on_h100().iteration_cost(batch));
  report(state);
}
BENCHMARK(deferred_fill);

void state_copy(benchmark::State& state) {
  const std::vector<BatchEntry> batch = state_copy_batch();
  for (auto _ : state)
    benchmark::DoNotOptimize(llama_on_h100().iteration_cost(batch));
  report(state);
}
BENCHMARK(state_copy);

void skip_kv_recursive(benchmark::State& state) {
  const std::vector<BatchEntry> batch = skip_kv_batch();
  for (auto _ : state)
    benchmark::DoNotOptimize(recursive_on_h100().iteration_cost(batch));
  report(state);
}
BENCHMARK(skip_kv_recursive);

void depthwise_recursive(benchmark::State& state) {
  const std::vector<BatchEntry> batch = depthwise_batch();
  for (auto _ : state)
    benchmark::DoNotOptimize(recursive_on_h100().iteration_cost(batch));
  report(state);
}
BENCHMARK(depthwise_recursive);

}  // namespace

void calibrated_decode(benchmark::State& state) {
  const std::vector<BatchEntry> batch = decode_batch(state.range(0));
  for (auto _ : state)
    benchmark::DoNotOptimize(calibrated(1, 1).iteration_cost(batch));
  report(state);
}
BENCHMARK(calibrated_decode)->Arg(1)->Arg(16)->Arg(256);

void calibrated_decode_tp4(benchmark::State& state) {
  const std::vector<BatchEntry> batch = decode_batch(state.range(0));
  for (auto _ : state)
    benchmark::DoNotOptimize(calibrated(4, 1).iteration_cost(batch));
  report(state);
}
BENCHMARK(calibrated_decode_tp4)->Arg(1)->Arg(16)->Arg(256);

void calibrated_decode_tp4_pp2(benchmark::State& state) {
  const std::vector<BatchEntry> batch = decode_batch(state.range(0));
  for (auto _ : state)
    benchmark::DoNotOptimize(calibrated(4, 2).iteration_cost(batch));
  report(state);
}
BENCHMARK(calibrated_decode_tp4_pp2)->Arg(1)->Arg(16)->Arg(256);

void calibrated_mixed_prefill(benchmark::State& state) {
  const std::vector<BatchEntry> batch = mixed_prefill_batch();
  for (auto _ : state)
    benchmark::DoNotOptimize(calibrated(1, 1).iteration_cost(batch));
  report(state);
}
BENCHMARK(calibrated_mixed_prefill);

BENCHMARK_MAIN();
