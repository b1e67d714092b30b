#include "exitsim/engine/linear.hpp"

#include <algorithm>
#include <vector>

namespace exitsim::engine {
namespace {

constexpr Eigen::Index k_block_outputs = 16;

}  // namespace

void linear_rows(const Matrix& w, const Matrix& x, std::span<const RowRange> chunks, Matrix& y) {
  y.resize(x.rows(), w.rows());
  std::vector<Eigen::Index> single;
  Eigen::Index next = 0;
  for (const RowRange& chunk : chunks) {
    for (; next < chunk.begin; ++next)
      single.push_back(next);
    const Eigen::Index rows = chunk.end - chunk.begin;
    y.middleRows(chunk.begin, rows).noalias() = x.middleRows(chunk.begin, rows) * w.transpose();
    next = chunk.end;
  }
  for (; next < x.rows(); ++next)
    single.push_back(next);
  if (single.empty())
    return;
  const Eigen::Index outputs = w.rows();
  const Eigen::Index blocks = (outputs + k_block_outputs - 1) / k_block_outputs;
  // Below a few thousand multiply-adds the threads cost more than they save.
  const bool parallel = blocks > 1 && static_cast<Eigen::Index>(single.size()) * outputs > 4096;
#pragma omp parallel for schedule(static) if (parallel)
  for (Eigen::Index b = 0; b < blocks; ++b) {
    const Eigen::Index first = b * k_block_outputs;
    const Eigen::Index width = std::min(k_block_outputs, outputs - first);
    const auto block = w.middleRows(first, width);
    for (const Eigen::Index r : single) {
      y.row(r).segment(first, width).noalias() = (block * x.row(r).transpose()).transpose();
    }
  }
}

}  // namespace exitsim::engine
