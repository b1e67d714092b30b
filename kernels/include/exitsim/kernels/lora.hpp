#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "exitsim/kernels/dtype.hpp"
#include "exitsim/kernels/launch.hpp"

namespace exitsim::kernels {

// Relaxed Recursive Transformers' per-recursion LoRA on one linear: y[r] += B_a (A_a x[r]) with
// the adapter a = adapter[r] of each row (none when negative), as engine::CpuModel adds it to the
// linear's output. A depth-wise batch mixes recursions in one call, so rows pick adapters
// independently. The adapters of a linear are packed one after another: A_a [rank_a, in] from
// a + a_offset[a], B_a [out, rank_a] from b + b_offset[a]; rank[a] 0 means none.
template <StorageType T>
struct LoraAdapters {
  const T* a = nullptr;
  const T* b = nullptr;
  const std::int32_t* a_offset = nullptr;  // per adapter
  const std::int32_t* b_offset = nullptr;  // per adapter
  const std::int32_t* rank = nullptr;      // per adapter
  const std::int32_t* adapter = nullptr;   // per row
};

struct LoraShape {
  std::int64_t rows = 0;
  std::int64_t in = 0;
  std::int64_t out = 0;
  std::int64_t max_rank = 0;  // the largest rank among the adapters: shared memory per block
  std::int64_t x_stride = 0;  // elements between rows of x; 0: in
  std::int64_t y_stride = 0;  // elements between rows of y; 0: out
};

// One block per row, whole warps covering max(in, out) up to 256 threads, max_rank floats of
// shared memory for A_a x. Throws std::invalid_argument for a bad shape (a rank above 4096).
LaunchConfig lora_launch(const LoraShape& shape);

// Enqueues the adapters' addition; x and y are device rows, y in T or fp32 (the GPU backend's o
// and down projections add into the fp32 residual). fp32 arithmetic.
template <StorageType T, StorageType Out>
void lora_add(const T* x, Out* y, const LoraAdapters<T>& adapters, const LoraShape& shape,
              cudaStream_t stream = nullptr);

}  // namespace exitsim::kernels
