#pragma once

#include <Eigen/Core>
#include <span>

#include "exitsim/engine/cpu_ops.hpp"

namespace exitsim::engine {

// Rows [begin, end) of a batch.
struct RowRange {
  Eigen::Index begin = 0;
  Eigen::Index end = 0;
};

// y = x W^T (W is [out, in], as PyTorch stores linears). Rows inside `chunks` (ascending,
// disjoint) are prompt chunks: each runs as one matrix-matrix product, the fast path for many
// rows. Every other row runs through a blocked kernel whose result for a row does not depend on
// the other rows: W is walked in blocks of 16 output rows that stay in cache while every row of
// the batch uses them (so decode reads the weights once per batch, as a real engine does), and
// each output is the same dot product whatever the batch. Output blocks spread over the cores.
void linear_rows(const Matrix& w, const Matrix& x, std::span<const RowRange> chunks, Matrix& y);

}  // namespace exitsim::engine
