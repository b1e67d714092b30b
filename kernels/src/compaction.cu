#include "exitsim/kernels/compaction.hpp"
#include "exitsim/kernels/cuda_check.hpp"
#include "shape_check.hpp"

namespace exitsim::kernels {
namespace {

constexpr std::int64_t k_max_threads = 256;

// `gather` picks which side the index applies to; the copy itself is the same.
template <typename T, bool gather>
__global__ void move_rows_kernel(const T* __restrict__ src, T* __restrict__ dst,
                                 const std::int32_t* __restrict__ index, int width,
                                 long long src_rows, long long dst_rows) {
  const long long i = blockIdx.x;
  const long long j = index[i];
  const long long from = gather ? j : i;
  const long long to = gather ? i : j;
  if (j < 0 || j >= (gather ? src_rows : dst_rows))
    return;
  const T* in = src + from * width;
  T* out = dst + to * width;
  for (int c = static_cast<int>(threadIdx.x); c < width; c += static_cast<int>(blockDim.x))
    out[c] = in[c];
}

template <typename T, bool gather>
void move_rows(const T* src, T* dst, const std::int32_t* index, const CompactionShape& shape,
               cudaStream_t stream) {
  const LaunchConfig config = compaction_launch(shape);
  if (config.empty())
    return;
  move_rows_kernel<T, gather><<<config.grid_x, config.threads, 0, stream>>>(
      src, dst, index, static_cast<int>(shape.width), shape.src_rows, shape.dst_rows);
  check_cuda(cudaGetLastError(), gather ? "gather_rows launch" : "scatter_rows launch");
}

}  // namespace

LaunchConfig compaction_launch(const CompactionShape& shape) {
  constexpr const char* name = "compaction";
  detail::require(detail::fits_int(shape.count), name, "count out of range");
  detail::require(detail::fits_int(shape.width), name, "width out of range");
  detail::require(shape.src_rows >= 0 && shape.dst_rows >= 0, name, "negative row count");
  LaunchConfig config;
  config.grid_x = shape.width == 0 ? 0u : static_cast<std::uint32_t>(shape.count);
  config.threads = detail::threads_for(shape.width, k_max_threads);
  return config;
}

template <StorageType T>
void gather_rows(const T* src, T* dst, const std::int32_t* index, const CompactionShape& shape,
                 cudaStream_t stream) {
  move_rows<T, true>(src, dst, index, shape, stream);
}

template <StorageType T>
void scatter_rows(const T* src, T* dst, const std::int32_t* index, const CompactionShape& shape,
                  cudaStream_t stream) {
  move_rows<T, false>(src, dst, index, shape, stream);
}

#define EXITSIM_COMPACTION(T)                                                              \
  template void gather_rows<T>(const T*, T*, const std::int32_t*, const CompactionShape&,  \
                               cudaStream_t);                                              \
  template void scatter_rows<T>(const T*, T*, const std::int32_t*, const CompactionShape&, \
                                cudaStream_t);
EXITSIM_COMPACTION(float)
EXITSIM_COMPACTION(__half)
EXITSIM_COMPACTION(__nv_bfloat16)
#undef EXITSIM_COMPACTION

}  // namespace exitsim::kernels
