#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "exitsim/kernels/dtype.hpp"
#include "exitsim/kernels/launch.hpp"

namespace exitsim::kernels {

// `rows` rows of `width` gate values and `width` up values. The CPU engine keeps gate and up as
// separate [rows, width] matrices (gate_proj, up_proj); a fused projection produces them side by
// side in one [rows, 2 * width] row (gate first), which is the same call with up = gate + width
// and in_stride = 2 * width.
struct SwigluShape {
  std::int64_t rows = 0;
  std::int64_t width = 0;
  std::int64_t in_stride = 0;   // elements between rows of gate (and of up); 0: width
  std::int64_t out_stride = 0;  // elements between rows of out; 0: width
};

// A grid-stride loop over rows * width elements, 256 threads per block.
LaunchConfig swiglu_launch(const SwigluShape& shape);

// out[r, i] = silu(gate[r, i]) * up[r, i], silu(g) = g / (1 + exp(-g)), in fp32 as the CPU
// engine computes it, rounded to T. out may alias gate (same stride) but not overlap it otherwise.
template <StorageType T>
void swiglu(const T* gate, const T* up, T* out, const SwigluShape& shape,
            cudaStream_t stream = nullptr);

}  // namespace exitsim::kernels
