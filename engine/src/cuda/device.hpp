#pragma once
// The GPU backend's device state, shared by its files (cuda_model.cpp: weights, head, routers;
// cuda_layer.cpp: the layer calls).

#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "cuda/device_array.hpp"
#include "cuda/pinned_staging.hpp"
#include "exitsim/engine/cuda_model.hpp"
#include "exitsim/engine/hidden_states.hpp"
#include "exitsim/kernels/cuda_check.hpp"
#include "exitsim/kernels/dtype.hpp"
#include "exitsim/kernels/gemm.hpp"
#include "exitsim/kernels/kv_write.hpp"

namespace exitsim::engine {

using cuda::DeviceArray;
using cuda::PinnedStaging;

// Calls f with std::type_identity<T> for the element type of the storage dtype.
template <typename F>
decltype(auto) with_storage(kernels::Dtype dtype, F&& f) {
  switch (dtype) {
    case kernels::Dtype::fp16:
      return f(std::type_identity<__half>{});
    case kernels::Dtype::bf16:
      return f(std::type_identity<__nv_bfloat16>{});
    case kernels::Dtype::fp32:
      break;
  }
  return f(std::type_identity<float>{});
}

// Device memory in the model's storage type (weights, K/V pool, the matrix products' operands),
// typed where it is used.
class StorageArray {
 public:
  template <kernels::StorageType T>
  T* reserve(std::size_t count) {
    return reinterpret_cast<T*>(bytes_.reserve(count * sizeof(T)));
  }
  void* reserve_bytes(std::size_t bytes) { return bytes_.reserve(bytes); }
  template <kernels::StorageType T>
  T* get() const {
    return reinterpret_cast<T*>(bytes_.get());
  }
  const void* data() const { return bytes_.get(); }
  void release() { bytes_ = DeviceArray<std::byte>(); }

  // Host floats rounded to `dtype` (to nearest even) and uploaded: weights, once.
  void upload(std::span<const float> host, kernels::Dtype dtype) {
    with_storage(dtype, [&]<typename T>(std::type_identity<T>) {
      // __half's and __nv_bfloat16's converting constructors round to nearest even.
      std::vector<T> converted(host.begin(), host.end());
      const auto* bytes = reinterpret_cast<const std::byte*>(converted.data());
      bytes_.upload({bytes, converted.size() * sizeof(T)});
    });
  }

 private:
  DeviceArray<std::byte> bytes_;
};

// One linear's per-recursion LoRA: every recursion's adapter packed one after another, and where
// each starts (kernels::LoraAdapters): `table` holds the A offsets, the B offsets and the ranks,
// one per recursion each (rank 0: that recursion has no adapter here).
struct LoraOnDevice {
  StorageArray a, b;
  DeviceArray<std::int32_t> table;
  std::int64_t max_rank = 0;
};

struct LayerOnDevice {
  DeviceArray<float> attn_norm, mlp_norm;  // fp32: the norms read them in fp32 arithmetic
  StorageArray qkv;                        // [q_dim + 2 kv_width, d_model]
  StorageArray o;                          // [d_model, q_dim]
  StorageArray gate_up;                    // [2 ffn, d_model]
  StorageArray down;                       // [d_model, ffn]
  std::array<LoraOnDevice, 7> lora;        // q, k, v, o, gate, up, down (shared-block layers)
  bool has_lora = false;
};

struct CudaModel::Device {
  int id = 0;
  std::string name;
  cudaStream_t stream = nullptr;
  kernels::CublasHandle cublas;
  // What weights, K/V and the matrix products' operands are stored in. The residual stream
  // (hidden states), norms, routers, logits and every accumulation stay fp32.
  kernels::Dtype dtype = kernels::Dtype::fp32;
  std::vector<LayerOnDevice> layers;
  DeviceArray<float> embedding, final_norm;
  StorageArray lm_head;
  std::vector<DeviceArray<float>> routers;
  // Rotary's head_dim / 2 frequencies: rotary_inv_freq's table, the one the CPU backend uses.
  DeviceArray<float> inv_freq;

  // The K/V pool, slot for slot the host KvCache's (grown to the largest pool seen).
  kernels::KvPoolShape pool_shape;
  StorageArray pool;
  DeviceArray<std::int32_t> pool_positions;

  // Scratch, grown to the largest call, reused. Calls are ordered on the one stream, so a call
  // may overwrite what the previous one left without waiting for it.
  DeviceArray<float> x, logits, summary, scores;
  StorageArray h, qkv, attention, gate_up, act, kv_scratch;
  DeviceArray<std::int32_t> state_index, call_ints;
  PinnedStaging staging;

  ~Device() {
    if (stream == nullptr)
      return;
    // Queued copies may still read the pinned staging, and the cuBLAS handle is bound to the
    // stream: drain it and unbind before the members go. Errors cannot be reported from here.
    cudaStreamSynchronize(stream);
    cublasSetStream(cublas.get(), nullptr);
    cudaStreamDestroy(stream);
  }

  // The host waits for everything enqueued: the staged uploads have all been read.
  void sync(const char* what) {
    kernels::check_cuda(cudaStreamSynchronize(stream), what);
    staging.reset();
  }

  void ensure_pool(const KvCache& kv) {
    const kernels::KvPoolShape wanted{kv.kv_width(), kv.block_size(), kv.total_blocks()};
    if (wanted.kv_width == pool_shape.kv_width && wanted.block_size == pool_shape.block_size &&
        wanted.total_blocks <= pool_shape.total_blocks) {
      return;
    }
    pool_shape = wanted;
    pool.release();
    pool.reserve_bytes(static_cast<std::size_t>(std::max<std::int64_t>(1, wanted.elements())) *
                       kernels::dtype_size(dtype));
    pool_positions = DeviceArray<std::int32_t>();
    pool_positions.reserve(static_cast<std::size_t>(std::max<std::int64_t>(1, wanted.slots())));
  }

  // Enqueues a copy of `from` into `to` through pinned staging; the host may reuse `from` at once.
  template <typename T>
  const T* upload(DeviceArray<T>& to, std::span<const T> from) {
    if (from.empty())
      return to.reserve(1);
    T* device = to.reserve(from.size());
    const std::size_t bytes = from.size() * sizeof(T);
    kernels::check_cuda(cudaMemcpyAsync(device, staging.stage(from.data(), bytes), bytes,
                                        cudaMemcpyHostToDevice, stream),
                        "cudaMemcpyAsync (to device)");
    return device;
  }
  template <typename T>
  const T* upload(DeviceArray<T>& to, const std::vector<T>& from) {
    return upload(to, std::span<const T>(from));
  }
};

// The integer arrays a layer call hands its kernels (positions, slots, block tables), packed and
// sent in one copy: each cudaMemcpyAsync costs the host microseconds, and a decode step makes
// dozens of layer calls.
class CallInts {
 public:
  // Adds an array; its device copy is at(part) once sent.
  std::size_t add(std::span<const std::int32_t> values) {
    offsets_.push_back(packed_.size());
    packed_.insert(packed_.end(), values.begin(), values.end());
    // Each part starts on a 128-byte boundary, as a fresh allocation would.
    packed_.resize((packed_.size() + k_align - 1) / k_align * k_align + k_align, 0);
    return offsets_.size() - 1;
  }
  void send(CudaModel::Device& device);
  const std::int32_t* at(std::size_t part) const { return device_ + offsets_.at(part); }

 private:
  static constexpr std::size_t k_align = 32;
  std::vector<std::int32_t> packed_;
  std::vector<std::size_t> offsets_;
  const std::int32_t* device_ = nullptr;
};

inline void CallInts::send(CudaModel::Device& device) {
  device_ = device.upload(device.call_ints, packed_);
}

// The GPU backend's hidden states: rows of one device array, on the model's stream. It must not
// outlive the model that made it.
class DeviceStates final : public HiddenStates {
 public:
  DeviceStates(CudaModel::Device& device, profiler::CuptiTracer* const& tracer, std::int64_t width)
      : HiddenStates(width), device_(device), tracer_(tracer) {}

  float* rows() const { return rows_.get(); }
  const CudaModel::Device& device() const { return device_; }

  Matrix read(std::span<const StateSlot> slots) const override;
  void write(std::span<const StateSlot> slots, const Matrix& rows) override;
  void copy(std::span<const StateSlot> from, std::span<const StateSlot> to) override;

 private:
  void grow(std::int64_t capacity) override;

  CudaModel::Device& device_;
  profiler::CuptiTracer* const& tracer_;  // the model's, as it is set now
  DeviceArray<float> rows_;
  // Scratch (read() is const to its callers): rows in transit and the slot lists of a move.
  mutable DeviceArray<float> staged_;
  mutable DeviceArray<std::int32_t> from_, to_;
};

// One op of a call: labelled for CUPTI, or, with only a host profiler, timed by a span that
// waits for the device at its end (so that it measures the device's time, not the launch's).
class DeviceOp {
 public:
  DeviceOp(const CudaModel::Device& device, profiler::CuptiTracer* tracer, const OpProfile& profile,
           const profiler::SpanShape& shape, std::string_view name, traces::OpKind kind)
      : device_(device) {
    if (tracer != nullptr) {
      label_.emplace(tracer, profiler::EngineOpLabel{std::string(name), kind, shape});
    } else if (profile.profiler != nullptr) {
      span_ = profile.profiler->span(name, kind, shape);
      wait_ = true;
    }
  }
  ~DeviceOp() {
    // Errors surface at the next checked call; a destructor cannot report them.
    if (wait_)
      cudaStreamSynchronize(device_.stream);
  }
  DeviceOp(const DeviceOp&) = delete;
  DeviceOp& operator=(const DeviceOp&) = delete;

 private:
  const CudaModel::Device& device_;
  std::optional<profiler::CuptiOpScope> label_;
  profiler::HostProfiler::Span span_;
  bool wait_ = false;
};

}  // namespace exitsim::engine
