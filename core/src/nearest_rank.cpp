#include "exitsim/core/nearest_rank.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>

namespace exitsim::core {

std::int64_t nearest_rank(double q, std::int64_t n) {
  const double rank = std::ceil(q * static_cast<double>(n) - 1e-9);
  return std::clamp<std::int64_t>(static_cast<std::int64_t>(rank), 1, n);
}

double nearest_rank_value(std::vector<double> values, double q) {
  if (values.empty())
    return 0;
  std::sort(values.begin(), values.end());
  const auto n = static_cast<std::int64_t>(values.size());
  return values[static_cast<std::size_t>(nearest_rank(q, n) - 1)];
}

}  // namespace exitsim::core
