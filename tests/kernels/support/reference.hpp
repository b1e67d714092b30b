#pragma once
// CPU references for the kernels in the kernels' layouts: rotary and attention are the CPU
// engine's own (engine/cpu_ops.hpp); the MLP activation, router scores and GEMM are written out
// here, in float where the engine uses float and double where it uses double.

#include <cstdint>
#include <span>
#include <vector>

#include "exitsim/engine/cpu_ops.hpp"
#include "exitsim/engine/kv_cache.hpp"

namespace exitsim::kernels::testing {

// In place, rows `row_stride` apart: engine::rotate_rows with the frequency table `inv_freq`
// (engine::rotary_inv_freq's, which the kernel is handed too).
void rotary_reference(std::vector<float>& x, std::int64_t rows, std::int64_t heads,
                      std::int64_t head_dim, std::int64_t row_stride,
                      std::span<const std::int32_t> positions, std::span<const float> inv_freq);

// silu(gate) * up, rows `in_stride` apart in gate and up, out contiguous.
std::vector<float> swiglu_reference(const std::vector<float>& gate, const std::vector<float>& up,
                                    std::int64_t rows, std::int64_t width, std::int64_t in_stride);

using QueryRow = engine::AttentionQuery;
using AttentionDims = engine::AttentionDims;

// engine::attend_rows: q [rows, n_heads * head_dim]; self_k / self_v [rows, kv_width], read only
// for probes; returns [rows, n_heads * head_dim].
std::vector<float> attention_reference(const std::vector<float>& q,
                                       const std::vector<float>& self_k,
                                       const std::vector<float>& self_v,
                                       std::span<const QueryRow> rows, const engine::KvCache& kv,
                                       const AttentionDims& dims);

// CpuModel::router_scores, with the dot product in double rather than float.
std::vector<double> router_reference(const std::vector<float>& x, const std::vector<float>& weight,
                                     float bias, std::int64_t rows, std::int64_t dim);

// y [m, n] = x [m, k] . w[n, k]^T in double.
std::vector<double> gemm_reference(const std::vector<float>& x, const std::vector<float>& w,
                                   std::int64_t m, std::int64_t n, std::int64_t k);

}  // namespace exitsim::kernels::testing
