#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "exitsim/kernels/dtype.hpp"
#include "exitsim/kernels/launch.hpp"

namespace exitsim::kernels {

struct LogitsShape {
  std::int64_t rows = 0;
  std::int64_t vocab = 0;
  std::int64_t stride = 0;  // elements between rows; 0: vocab
};

// One block per row, up to 1024 threads striding over the vocabulary.
LaunchConfig top2_confidence_launch(const LogitsShape& shape);

// Per row of fp32 logits (the lm-head GEMM's output), engine::top2_confidence without the
// softmax: top1_index (lowest index among ties), top1_prob = 1 / sum_j exp(l_j - max), and
// margin = top1_prob - exp(top2 - max) / sum (top1_prob for a 1-entry vocabulary). The sum is
// fp32. A row whose logits are all -inf gets index -1 and NaN probabilities (the CPU throws).
// Outputs are device arrays of `rows` entries.
void top2_confidence(const float* logits, const LogitsShape& shape, std::int32_t* top1_index,
                     float* top1_prob, float* margin, cudaStream_t stream = nullptr);

struct RouterShape {
  std::int64_t rows = 0;
  std::int64_t dim = 0;
  std::int64_t stride = 0;  // elements between rows of x; 0: dim
};

// One block per row, up to 256 threads.
LaunchConfig router_scores_launch(const RouterShape& shape);

// scores[r] = sigmoid(dot(x[r], weight) + bias), the Mixture-of-Recursions router of
// engine::CpuModel::router_scores; the dot product accumulates in fp32.
template <StorageType T>
void router_scores(const T* x, const T* weight, float bias, float* scores, const RouterShape& shape,
                   cudaStream_t stream = nullptr);

}  // namespace exitsim::kernels
