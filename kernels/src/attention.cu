#include <cmath>

#include "device_util.cuh"
#include "exitsim/kernels/attention.hpp"
#include "exitsim/kernels/cuda_check.hpp"
#include "shape_check.hpp"

namespace exitsim::kernels {
namespace {

// Each lane owns head_dim values spaced one warp apart, so one warp reads a key coalesced.
constexpr int k_max_per_lane = static_cast<int>(k_attention_max_head_dim / k_warp_size);

struct Dims {
  int n_heads;
  int group;  // query heads per K/V head
  int head_dim;
  int kv_width;
  long long q_stride;
  long long self_stride;
  int streams;
  int max_blocks;
  long long block_size;
  float scale;
};

// Warps split the row's keys round-robin and each keeps its own online softmax (running max m,
// sum l, unnormalised accumulator); the block merges the warps at the end. Positions ascend
// within a stream, so a warp stops at its first key past the query.
template <typename T>
__global__ void attention_kernel(AttentionArgs<T> a, Dims d) {
  extern __shared__ float shared[];
  const int lane = static_cast<int>(threadIdx.x) % device::k_warp;
  const int warp = static_cast<int>(threadIdx.x) / device::k_warp;
  const int warps = static_cast<int>(blockDim.x) / device::k_warp;
  const long long row = blockIdx.x / d.n_heads;
  const int head = static_cast<int>(blockIdx.x % d.n_heads);
  const int kv_offset = (head / d.group) * d.head_dim;
  const int position = a.row_positions[row];
  const int stream = a.row_streams[row];

  float q[k_max_per_lane];
  float acc[k_max_per_lane];
  const T* query = a.q + row * d.q_stride + static_cast<long long>(head) * d.head_dim;
#pragma unroll
  for (int i = 0; i < k_max_per_lane; ++i) {
    const int c = lane + i * device::k_warp;
    q[i] = c < d.head_dim ? device::to_float(query[c]) : 0.0f;
    acc[i] = 0.0f;
  }
  float m = -INFINITY;
  float l = 0.0f;
  auto attend = [&](const T* key, const T* value) {
    float dot = 0.0f;
#pragma unroll
    for (int i = 0; i < k_max_per_lane; ++i) {
      const int c = lane + i * device::k_warp;
      if (c < d.head_dim)
        dot += q[i] * device::to_float(key[c]);
    }
    const float score = device::warp_sum(dot) * d.scale;
    const float m_new = fmaxf(m, score);
    const float correction = expf(m - m_new);  // 0 for the first key (m = -inf)
    const float p = expf(score - m_new);
    l = l * correction + p;
#pragma unroll
    for (int i = 0; i < k_max_per_lane; ++i) {
      const int c = lane + i * device::k_warp;
      if (c < d.head_dim)
        acc[i] = acc[i] * correction + p * device::to_float(value[c]);
    }
    m = m_new;
  };

  if (stream >= 0 && stream < d.streams) {
    const long long capacity = static_cast<long long>(d.max_blocks) * d.block_size;
    const long long keys = min(static_cast<long long>(a.stream_rows[stream]), capacity);
    const std::int32_t* table = a.block_tables + static_cast<long long>(stream) * d.max_blocks;
    for (long long j = warp; j < keys; j += warps) {
      const long long slot = table[j / d.block_size] * d.block_size + j % d.block_size;
      if (a.pool_positions[slot] > position)
        break;  // uniform across the warp: every lane read the same slot
      attend(a.pool + kv_key_offset(slot, d.kv_width, d.block_size) + kv_offset,
             a.pool + kv_value_offset(slot, d.kv_width, d.block_size) + kv_offset);
    }
  }
  if (warp == 0 && a.row_self != nullptr && a.row_self[row] != 0) {
    attend(a.self_k + row * d.self_stride + kv_offset, a.self_v + row * d.self_stride + kv_offset);
  }

  float* warp_acc = shared;  // [warps][head_dim]
  float* warp_max = shared + warps * d.head_dim;
  float* warp_sum = warp_max + warps;
#pragma unroll
  for (int i = 0; i < k_max_per_lane; ++i) {
    const int c = lane + i * device::k_warp;
    if (c < d.head_dim)
      warp_acc[warp * d.head_dim + c] = acc[i];
  }
  if (lane == 0) {
    warp_max[warp] = m;
    warp_sum[warp] = l;
  }
  __syncthreads();
  // Warps that saw no key (l = 0) are left out, which also avoids -inf - -inf.
  float m_all = -INFINITY;
  for (int w = 0; w < warps; ++w) {
    if (warp_sum[w] > 0.0f)
      m_all = fmaxf(m_all, warp_max[w]);
  }
  float l_all = 0.0f;
  for (int w = 0; w < warps; ++w) {
    if (warp_sum[w] > 0.0f)
      l_all += warp_sum[w] * expf(warp_max[w] - m_all);
  }
  T* out = a.out + (row * d.n_heads + head) * d.head_dim;
  for (int c = static_cast<int>(threadIdx.x); c < d.head_dim; c += static_cast<int>(blockDim.x)) {
    float o = 0.0f;
    for (int w = 0; w < warps; ++w) {
      if (warp_sum[w] > 0.0f)
        o += warp_acc[w * d.head_dim + c] * expf(warp_max[w] - m_all);
    }
    out[c] = device::from_float<T>(l_all > 0.0f ? o / l_all : 0.0f);
  }
}

}  // namespace

LaunchConfig attention_launch(const AttentionShape& shape) {
  constexpr const char* name = "attention";
  detail::require(detail::fits_int(shape.rows), name, "rows out of range");
  detail::require(shape.n_heads > 0 && shape.n_kv_heads > 0, name, "head counts must be positive");
  detail::require(shape.n_heads % shape.n_kv_heads == 0, name,
                  "n_heads must be a multiple of n_kv_heads");
  detail::require(shape.head_dim > 0 && shape.head_dim <= k_attention_max_head_dim, name,
                  "head_dim must be in [1, 256]");
  detail::require(detail::fits_int(shape.rows * shape.n_heads), name, "too many (row, head) pairs");
  detail::require(shape.pool.kv_width == shape.n_kv_heads * shape.head_dim, name,
                  "pool.kv_width must be n_kv_heads * head_dim");
  detail::require(shape.pool.block_size > 0 && shape.pool.total_blocks >= 0, name,
                  "bad pool shape");
  detail::require(detail::fits_int(shape.streams) && detail::fits_int(shape.max_blocks), name,
                  "block table out of range");
  detail::require(detail::fits_int(shape.max_blocks * shape.pool.block_size), name,
                  "streams longer than int32 positions");
  detail::require(shape.q_stride == 0 || shape.q_stride >= shape.n_heads * shape.head_dim, name,
                  "q_stride shorter than a row");
  detail::require(shape.self_stride == 0 || shape.self_stride >= shape.pool.kv_width, name,
                  "self_stride shorter than a K/V row");
  LaunchConfig config;
  config.grid_x = static_cast<std::uint32_t>(shape.rows * shape.n_heads);
  config.threads = static_cast<std::uint32_t>(k_attention_warps * k_warp_size);
  config.shared_bytes =
      static_cast<std::size_t>(k_attention_warps * (shape.head_dim + 2)) * sizeof(float);
  return config;
}

template <StorageType T>
void attention(const AttentionArgs<T>& args, const AttentionShape& shape, cudaStream_t stream) {
  const LaunchConfig config = attention_launch(shape);
  if (config.empty())
    return;
  Dims d{};
  d.n_heads = static_cast<int>(shape.n_heads);
  d.group = static_cast<int>(shape.n_heads / shape.n_kv_heads);
  d.head_dim = static_cast<int>(shape.head_dim);
  d.kv_width = static_cast<int>(shape.pool.kv_width);
  d.q_stride = shape.q_stride == 0 ? shape.n_heads * shape.head_dim : shape.q_stride;
  d.self_stride = shape.self_stride == 0 ? shape.pool.kv_width : shape.self_stride;
  d.streams = static_cast<int>(shape.streams);
  d.max_blocks = static_cast<int>(shape.max_blocks);
  d.block_size = shape.pool.block_size;
  // Rounded from double as the CPU engine's scale is, then applied in fp32.
  d.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(shape.head_dim)));
  attention_kernel<T><<<config.grid_x, config.threads, config.shared_bytes, stream>>>(args, d);
  check_cuda(cudaGetLastError(), "attention launch");
}

template void attention<float>(const AttentionArgs<float>&, const AttentionShape&, cudaStream_t);
template void attention<__half>(const AttentionArgs<__half>&, const AttentionShape&, cudaStream_t);
template void attention<__nv_bfloat16>(const AttentionArgs<__nv_bfloat16>&, const AttentionShape&,
                                       cudaStream_t);

}  // namespace exitsim::kernels
