#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace exitsim::kernels {

// y[r, :] = x[r, :] / sqrt(mean(x[r, :]^2) + eps) * weight, fp32, row-major, all pointers on the
// device; x and y may alias. Enqueued on `stream` (asynchronous). Throws InputError (field
// "cuda") when the launch fails, and std::invalid_argument for a negative shape or eps.
void rms_norm(const float* x, const float* weight, float* y, std::int64_t rows, std::int64_t dim,
              float eps, cudaStream_t stream = nullptr);

}  // namespace exitsim::kernels
