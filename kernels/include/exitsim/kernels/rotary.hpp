#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "exitsim/kernels/dtype.hpp"
#include "exitsim/kernels/launch.hpp"

namespace exitsim::kernels {

// Rows of q or k, each `heads` vectors of `head_dim` values.
struct RotaryShape {
  std::int64_t rows = 0;
  std::int64_t heads = 0;
  std::int64_t head_dim = 0;  // even
  // Elements from one row to the next; 0 means heads * head_dim (contiguous). Larger strides let
  // the kernel rotate K inside a fused K|V projection output.
  std::int64_t row_stride = 0;
};

// One block per row; the block first copies the head_dim / 2 frequencies into shared memory,
// then its threads stride over (head, pair). Throws std::invalid_argument for a bad shape.
LaunchConfig rotary_launch(const RotaryShape& shape);

// Rotates x in place exactly as the CPU engine does (rotate-half pairing: value j pairs with
// j + head_dim / 2 within each head; angle = float(position) * inv_freq[j] in float).
// `inv_freq` holds the head_dim / 2 frequencies on the device: the engine's rotary_inv_freq table
// (rope.hpp), uploaded once, so that any frequency scaling is computed in one place for both
// backends. `positions` holds one int32 per row, on the device. Arithmetic is fp32, the result is
// rounded to T. Throws std::invalid_argument for a bad shape, or a null table with rows to rotate.
template <StorageType T>
void rotary(T* x, const std::int32_t* positions, const float* inv_freq, const RotaryShape& shape,
            cudaStream_t stream = nullptr);

}  // namespace exitsim::kernels
