// Request-trace reading speed on the public traces, against a baseline in the same run: a plain
// std::getline scan of the same file (the floor any line-based reader pays for I/O).
//
//   build/release/bin/trace_reader_bench
//
// Reports requests/s; the ratio of each reader to its file's getline baseline is the figure the
// README quotes.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include "exitsim/analysis/trace_summary.hpp"
#include "exitsim/traces/request_trace.hpp"

namespace {

// $EXITSIM_TRACES when set, else this project's ../shared/traces.
const std::string k_traces_dir = std::getenv("EXITSIM_TRACES") != nullptr
                                     ? std::string(std::getenv("EXITSIM_TRACES"))
                                     : std::string(EXITSIM_SHARED_TRACES_DIR);

// The trace's path, or nullopt after marking the benchmark skipped when the file is absent.
std::optional<std::string> present_trace(benchmark::State& state, const char* name) {
  std::string path = k_traces_dir + "/" + name;
  if (!std::filesystem::exists(path)) {
    state.SkipWithError("trace absent (../shared/traces)");
    return std::nullopt;
  }
  return path;
}

void getline_baseline(benchmark::State& state, const char* name) {
  const std::optional<std::string> path = present_trace(state, name);
  if (!path)
    return;
  std::int64_t lines = 0;
  for (auto _ : state) {
    std::ifstream in(*path, std::ios::binary);
    std::string line;
    std::int64_t count = 0;
    while (std::getline(in, line))
      ++count;
    benchmark::DoNotOptimize(count);
    lines = count;
  }
  state.SetItemsProcessed(state.iterations() * lines);
}

void read_requests(benchmark::State& state, const char* name) {
  const std::optional<std::string> path = present_trace(state, name);
  if (!path)
    return;
  std::int64_t requests = 0;
  for (auto _ : state) {
    const auto source = exitsim::traces::open_request_trace(*path);
    std::int64_t count = 0;
    while (auto request = source->next()) {
      benchmark::DoNotOptimize(request->input_tokens);
      ++count;
    }
    requests = count;
  }
  state.SetItemsProcessed(state.iterations() * requests);
}

void inspect_trace(benchmark::State& state, const char* name) {
  const std::optional<std::string> path = present_trace(state, name);
  if (!path)
    return;
  std::int64_t requests = 0;
  for (auto _ : state) {
    const auto source = exitsim::traces::open_request_trace(*path);
    const auto summary = exitsim::analysis::summarize_requests(*source);
    requests = summary.requests;
    benchmark::DoNotOptimize(summary.input.p99);
  }
  state.SetItemsProcessed(state.iterations() * requests);
}

BENCHMARK_CAPTURE(getline_baseline, azure, "azure_llm_2023_conv.csv")
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(read_requests, azure, "azure_llm_2023_conv.csv")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(inspect_trace, azure, "azure_llm_2023_conv.csv")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(getline_baseline, mooncake, "mooncake_synthetic.jsonl")
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(read_requests, mooncake, "mooncake_synthetic.jsonl")
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(getline_baseline, arxiv, "arxiv_summarization_lengths.csv")
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(read_requests, arxiv, "arxiv_summarization_lengths.csv")
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
