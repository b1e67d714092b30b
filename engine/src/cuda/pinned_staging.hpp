#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <vector>

#include "exitsim/kernels/cuda_check.hpp"

namespace exitsim::engine::cuda {

// Page-locked host memory that the GPU backend's small uploads (positions, slots, block tables)
// are staged in, so that cudaMemcpyAsync neither waits for the stream (as it may from pageable
// memory) nor reads host memory the caller has reused. A staged region is handed out once per
// stream synchronization: reset() may only be called after the stream has drained.
class PinnedStaging {
 public:
  PinnedStaging() = default;
  ~PinnedStaging() {
    for (const Chunk& c : chunks_)
      cudaFreeHost(c.data);
  }
  PinnedStaging(const PinnedStaging&) = delete;
  PinnedStaging& operator=(const PinnedStaging&) = delete;

  // A pinned copy of `bytes` bytes of `data`, valid until the next reset().
  const void* stage(const void* data, std::size_t bytes) {
    const std::size_t aligned = (bytes + k_alignment - 1) / k_alignment * k_alignment;
    if (chunks_.empty() || chunks_.back().used + aligned > chunks_.back().size) {
      const std::size_t last = chunks_.empty() ? k_first_chunk / 2 : chunks_.back().size;
      Chunk chunk{nullptr, std::max(aligned, 2 * last), 0};
      void* p = nullptr;
      kernels::check_cuda(cudaMallocHost(&p, chunk.size), "cudaMallocHost (upload staging)");
      chunk.data = static_cast<std::byte*>(p);
      chunks_.push_back(chunk);
    }
    Chunk& chunk = chunks_.back();
    std::byte* out = chunk.data + chunk.used;
    if (bytes > 0)
      std::memcpy(out, data, bytes);
    chunk.used += aligned;
    return out;
  }

  // Every staged copy has been read: keeps the largest chunk (the last) for the next round.
  void reset() {
    if (chunks_.empty())
      return;
    for (std::size_t i = 0; i + 1 < chunks_.size(); ++i)
      cudaFreeHost(chunks_[i].data);
    chunks_.erase(chunks_.begin(), chunks_.end() - 1);
    chunks_.back().used = 0;
  }

 private:
  static constexpr std::size_t k_alignment = 256;
  static constexpr std::size_t k_first_chunk = std::size_t{1} << 16;
  struct Chunk {
    std::byte* data = nullptr;
    std::size_t size = 0;
    std::size_t used = 0;
  };
  std::vector<Chunk> chunks_;
};

}  // namespace exitsim::engine::cuda
