#pragma once

#include <cstdint>
#include <vector>

namespace exitsim::core {

// The 1-based nearest rank of quantile q among n values: the smallest k with k >= q * n, at least
// 1. A slack of 1e-9 absorbs the representation error of decimal q (0.29 * 100 is 28.999...96 in
// binary, yet means rank 29). Requires n >= 1 and q in [0, 1]. Every percentile exitsim reports
// (the simulator's metrics, validation, the engine's op timings) takes this rank.
std::int64_t nearest_rank(double q, std::int64_t n);

// The value of nearest rank for quantile q among `values` (sorted here); 0 when there are none.
double nearest_rank_value(std::vector<double> values, double q);

}  // namespace exitsim::core
