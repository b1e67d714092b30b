#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "exitsim/kernels/dtype.hpp"
#include "exitsim/kernels/launch.hpp"

namespace exitsim::kernels {

// Moving the tokens still active at a depth into a dense batch (gather) and their results back
// (scatter). `count` index entries, rows of `width` elements.
struct CompactionShape {
  std::int64_t count = 0;
  std::int64_t width = 0;
  std::int64_t src_rows = 0;  // rows src holds: gather skips indices outside [0, src_rows)
  std::int64_t dst_rows = 0;  // rows dst holds: scatter skips indices outside [0, dst_rows)
};

// One block per index entry, threads over the row.
LaunchConfig compaction_launch(const CompactionShape& shape);

// dst[i, :] = src[index[i], :] for i < count. Indices are int32 on the device, so they cannot be
// checked on the host; an out-of-range one leaves dst[i] untouched.
template <StorageType T>
void gather_rows(const T* src, T* dst, const std::int32_t* index, const CompactionShape& shape,
                 cudaStream_t stream = nullptr);

// dst[index[i], :] = src[i, :] for i < count. Repeated indices race (one of the rows wins); an
// out-of-range index is skipped.
template <StorageType T>
void scatter_rows(const T* src, T* dst, const std::int32_t* index, const CompactionShape& shape,
                  cudaStream_t stream = nullptr);

}  // namespace exitsim::kernels
