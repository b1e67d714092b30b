#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "exitsim/kernels/dtype.hpp"

namespace exitsim::kernels {

// y[r, :] = x[r, :] / sqrt(mean(x[r, :]^2) + eps) * weight, row-major, all pointers on the
// device, arithmetic in fp32 whatever the storage. The GPU backend keeps its residual stream in
// fp32 and feeds the matrix products fp16/bf16, so the norm converts as it writes: In = fp32 with
// any Out, or In = Out. x and y may alias (same type). The weight is fp32 (d_model values).
// Enqueued on `stream` (asynchronous). Throws InputError (field "cuda") when the launch fails,
// and std::invalid_argument for a negative shape or eps.
template <StorageType In, StorageType Out>
void rms_norm(const In* x, const float* weight, Out* y, std::int64_t rows, std::int64_t dim,
              float eps, cudaStream_t stream = nullptr);

}  // namespace exitsim::kernels
