// Summary-only serving-benchmark results (benchmark_summary.cpp), for benchmark_validation.cpp.
#pragma once

#include <vector>

#include "exitsim/analysis/benchmark_validation.hpp"

namespace exitsim::analysis {

// The figures a summary-only run's summary gives, under exitsim's names, in benchmark_figures'
// order; throughput and the p50s judged.
std::vector<NamedFigure> summary_figures(const traces::ServingBenchmark& benchmark);

}  // namespace exitsim::analysis
