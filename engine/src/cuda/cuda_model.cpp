#include "exitsim/engine/cuda_model.hpp"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <unordered_map>

#include "cuda/device.hpp"
#include "exitsim/core/error.hpp"
#include "exitsim/engine/rope.hpp"
#include "exitsim/kernels/attention.hpp"
#include "exitsim/kernels/compaction.hpp"
#include "exitsim/kernels/cuda_check.hpp"
#include "exitsim/kernels/gemm.hpp"
#include "exitsim/kernels/kv_project.hpp"
#include "exitsim/kernels/kv_write.hpp"
#include "exitsim/kernels/lm_head.hpp"
#include "exitsim/kernels/rms_norm.hpp"
#include "exitsim/kernels/rotary.hpp"
#include "exitsim/kernels/swiglu.hpp"
#include "exitsim/traces/engine_ops.hpp"

namespace exitsim::engine {

namespace ops = traces::engine_ops;

namespace {

std::span<const float> span_of(const Eigen::VectorXf& v) {
  return {v.data(), static_cast<std::size_t>(v.size())};
}

// Rows of the given matrices stacked into one row-major block: q|k|v and gate|up become one
// weight each, so each is one GEMM.
std::vector<float> stacked(std::initializer_list<const Matrix*> parts) {
  std::vector<float> out;
  for (const Matrix* m : parts)
    out.insert(out.end(), m->data(), m->data() + m->size());
  return out;
}

// Every recursion's adapter of linear `linear` in shared-block layer `j` (0-based within the
// block), packed for kernels::lora_add; max_rank 0 when no recursion has one.
LoraOnDevice lora_of(const ModelWeights& weights, int recursions, std::size_t j, std::size_t linear,
                     kernels::Dtype storage) {
  std::vector<float> a, b;
  std::vector<std::int32_t> a_offsets, b_offsets, ranks;
  LoraOnDevice out;
  for (std::size_t r = 0; r < static_cast<std::size_t>(recursions); ++r) {
    a_offsets.push_back(static_cast<std::int32_t>(a.size()));
    b_offsets.push_back(static_cast<std::int32_t>(b.size()));
    const LinearLora* lora = nullptr;
    if (r < weights.lora.size() && j < weights.lora[r].layers.size())
      lora = &weights.lora[r].layers[j][linear];
    if (lora == nullptr || lora->a.rows() == 0) {
      ranks.push_back(0);
      continue;
    }
    a.insert(a.end(), lora->a.data(), lora->a.data() + lora->a.size());
    b.insert(b.end(), lora->b.data(), lora->b.data() + lora->b.size());
    ranks.push_back(static_cast<std::int32_t>(lora->a.rows()));
    out.max_rank = std::max<std::int64_t>(out.max_rank, lora->a.rows());
    if (a.size() > static_cast<std::size_t>(INT32_MAX) ||
        b.size() > static_cast<std::size_t>(INT32_MAX)) {
      throw std::length_error("LoRA adapters of one linear beyond 2^31 elements");
    }
  }
  if (out.max_rank == 0)
    return out;
  out.a.upload(a, storage);
  out.b.upload(b, storage);
  std::vector<std::int32_t> table = a_offsets;
  table.insert(table.end(), b_offsets.begin(), b_offsets.end());
  table.insert(table.end(), ranks.begin(), ranks.end());
  out.table.upload(table);
  return out;
}

}  // namespace

CudaModel::CudaModel(const ModelConfig& config, const ModelWeights& weights, int device,
                     kernels::Dtype storage)
    : config_(config), weights_(weights) {
  if (!kernels::cuda_device_available()) {
    throw InputError({"", 0, 0, "cuda"},
                     expected_found("a CUDA device (--backend cuda)",
                                    "none: " + std::string(kernels::cuda_unavailable_reason())));
  }
  // Before the Device: its cuBLAS handle belongs to the current device.
  kernels::check_cuda(cudaSetDevice(device), "cudaSetDevice");
  auto d = std::make_unique<Device>();
  d->id = device;
  d->dtype = storage;
  cudaDeviceProp properties{};
  kernels::check_cuda(cudaGetDeviceProperties(&properties, device), "cudaGetDeviceProperties");
  d->name = properties.name;
  kernels::check_cuda(cudaStreamCreateWithFlags(&d->stream, cudaStreamNonBlocking),
                      "cudaStreamCreate");
  for (const LayerWeights& w : weights.layers) {
    LayerOnDevice& l = d->layers.emplace_back();
    l.attn_norm.upload(span_of(w.attn_norm));
    l.mlp_norm.upload(span_of(w.mlp_norm));
    l.qkv.upload(stacked({&w.wq, &w.wk, &w.wv}), storage);
    l.o.upload(stacked({&w.wo}), storage);
    l.gate_up.upload(stacked({&w.w_gate, &w.w_up}), storage);
    l.down.upload(stacked({&w.w_down}), storage);
    const int j = static_cast<int>(d->layers.size()) - 1 - config.shape.depth.prelude_layers;
    if (!weights.lora.empty() && j >= 0 && j < config.shape.depth.block_layers) {
      for (std::size_t linear = 0; linear < l.lora.size(); ++linear) {
        l.lora[linear] = lora_of(weights, config.shape.depth.recursions,
                                 static_cast<std::size_t>(j), linear, storage);
        l.has_lora = l.has_lora || l.lora[linear].max_rank > 0;
      }
    }
  }
  d->embedding.upload(stacked({&weights.embedding}));
  d->final_norm.upload(span_of(weights.final_norm));
  d->lm_head.upload(stacked({&weights.lm_head}), storage);
  for (const Router& r : weights.routers)
    d->routers.emplace_back(span_of(r.weight));
  const std::vector<float> inv_freq =
      rotary_inv_freq(config.shape.head_dim, config.rope_theta, config.rope_scaling);
  d->inv_freq.upload(inv_freq);
  // cudaMemcpy from pageable memory may return before the data lands, and the model's stream
  // does not wait for the legacy default stream the uploads ran on.
  kernels::check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize (weights)");
  device_ = std::move(d);
}

CudaModel::~CudaModel() = default;

// A profile measured in one storage type prices only that one: bf16 moves half fp32's bytes.
std::string CudaModel::hardware() const {
  return fmt::format("{} ({})", device_->name, kernels::dtype_name(device_->dtype));
}

kernels::Dtype CudaModel::storage() const {
  return device_->dtype;
}

LayerSource CudaModel::source_of(int executed_layer) const {
  return layer_source(depth(), executed_layer);
}

DeviceStates& CudaModel::on_device(HiddenStates& states) const {
  auto* on = dynamic_cast<DeviceStates*>(&states);
  if (on == nullptr || &on->device() != device_.get())
    throw std::logic_error("hidden states from another backend handed to the CUDA model");
  return *on;
}

const DeviceStates& CudaModel::on_device(const HiddenStates& states) const {
  return on_device(const_cast<HiddenStates&>(states));
}

std::unique_ptr<HiddenStates> CudaModel::make_states() const {
  return std::make_unique<DeviceStates>(*device_, tracer_, config_.shape.d_model);
}

void CudaModel::embed(std::span<const std::int32_t> tokens, HiddenStates& states,
                      std::span<const StateSlot> into) const {
  Device& d = *device_;
  DeviceStates& hidden = on_device(states);
  const auto n = static_cast<std::int64_t>(tokens.size());
  hidden.check_held(into, n);
  const std::int64_t vocab = weights_.embedding.rows();
  for (const std::int32_t token : tokens) {
    if (token < 0 || token >= vocab)
      throw std::out_of_range("embed: token id out of the vocabulary");
  }
  if (n == 0)
    return;
  const std::int64_t dim = config_.shape.d_model;
  const profiler::SpanShape shape{.batch_tokens = n};
  DeviceOp label(d, tracer_, {}, shape, "embed.kernels", traces::OpKind::other);
  float* x = d.x.reserve(static_cast<std::size_t>(n * dim));
  CallInts ints;
  const std::size_t tokens_part = ints.add(tokens);
  const std::size_t into_part = ints.add(into);
  ints.send(d);
  kernels::gather_rows<float>(d.embedding.get(), x, ints.at(tokens_part),
                              {.count = n, .width = dim, .src_rows = vocab, .dst_rows = n},
                              d.stream);
  kernels::scatter_rows<float>(
      x, hidden.rows(), ints.at(into_part),
      {.count = n, .width = dim, .src_rows = n, .dst_rows = hidden.capacity()}, d.stream);
}

// The states' rows gathered into the scratch rows x: what the head and the routers read. The
// caller has checked the slots.
const float* CudaModel::gather(const DeviceStates& hidden, std::span<const StateSlot> slots) const {
  Device& d = *device_;
  const auto n = static_cast<std::int64_t>(slots.size());
  const std::int64_t dim = config_.shape.d_model;
  float* x = d.x.reserve(static_cast<std::size_t>(n * dim));
  kernels::gather_rows<float>(
      hidden.rows(), x, d.upload(d.state_index, slots),
      {.count = n, .width = dim, .src_rows = hidden.capacity(), .dst_rows = n}, d.stream);
  return x;
}

// Final norm and LM head over the states into d.logits (vocab floats per row), enqueued.
void CudaModel::enqueue_head(const DeviceStates& hidden, std::span<const StateSlot> slots) const {
  Device& d = *device_;
  const auto n = static_cast<std::int64_t>(slots.size());
  const std::int64_t dim = config_.shape.d_model;
  const std::int64_t vocab = weights_.lm_head.rows();
  const float* x = gather(hidden, slots);
  float* logits = d.logits.reserve(static_cast<std::size_t>(n * vocab));
  with_storage(d.dtype, [&]<typename T>(std::type_identity<T>) {
    T* h = d.h.reserve<T>(static_cast<std::size_t>(n * dim));
    kernels::rms_norm(x, d.final_norm.get(), h, n, dim, config_.rms_eps, d.stream);
    kernels::linear<T, float>(d.cublas, h, d.lm_head.get<T>(), logits,
                              {.m = n, .n = vocab, .k = dim}, false, d.stream);
  });
}

Matrix CudaModel::logits(const HiddenStates& states, std::span<const StateSlot> slots) const {
  Device& d = *device_;
  const DeviceStates& hidden = on_device(states);
  hidden.check_held(slots);
  const auto n = static_cast<std::int64_t>(slots.size());
  Matrix out(n, weights_.lm_head.rows());
  if (n == 0)
    return out;
  const profiler::SpanShape shape{.batch_tokens = n};
  {
    // The loop times the head as a host span ("lm_head"); the label attributes its kernels.
    const DeviceOp label(d, tracer_, {}, shape, "lm_head.kernels", traces::OpKind::lm_head);
    enqueue_head(hidden, slots);
  }
  // The decision the loop takes on these logits is where the host waits for the device.
  const DeviceOp wait(d, tracer_, {}, shape, ops::host_sync, traces::OpKind::memcpy);
  kernels::check_cuda(cudaMemcpyAsync(out.data(), d.logits.get(),
                                      sizeof(float) * static_cast<std::size_t>(out.size()),
                                      cudaMemcpyDeviceToHost, d.stream),
                      "cudaMemcpyAsync (logits)");
  d.sync("cudaStreamSynchronize (logits)");
  return out;
}

// The fused kernel computes the probabilities whether asked or not: they cost it one more pass
// over logits it already reads.
std::vector<Top2Confidence> CudaModel::top2(const HiddenStates& states,
                                            std::span<const StateSlot> slots,
                                            bool /*probabilities*/) const {
  Device& d = *device_;
  const DeviceStates& hidden = on_device(states);
  hidden.check_held(slots);
  const auto n = static_cast<std::int64_t>(slots.size());
  std::vector<Top2Confidence> out(slots.size());
  if (n == 0)
    return out;
  const profiler::SpanShape shape{.batch_tokens = n};
  // One device array for the three outputs, so one copy brings them back: indices (int32, the
  // size of a float) first, then the probabilities, then the margins.
  float* summary = d.summary.reserve(static_cast<std::size_t>(3 * n));
  auto* indices = reinterpret_cast<std::int32_t*>(summary);
  {
    const DeviceOp label(d, tracer_, {}, shape, "lm_head.kernels", traces::OpKind::lm_head);
    enqueue_head(hidden, slots);
    kernels::top2_confidence(d.logits.get(), {.rows = n, .vocab = weights_.lm_head.rows()}, indices,
                             summary + n, summary + 2 * n, d.stream);
  }
  const DeviceOp wait(d, tracer_, {}, shape, ops::host_sync, traces::OpKind::memcpy);
  std::vector<float> host(static_cast<std::size_t>(3 * n));
  kernels::check_cuda(cudaMemcpyAsync(host.data(), summary, sizeof(float) * host.size(),
                                      cudaMemcpyDeviceToHost, d.stream),
                      "cudaMemcpyAsync (top-2 summary)");
  d.sync("cudaStreamSynchronize (top-2 summary)");
  for (std::size_t r = 0; r < out.size(); ++r) {
    std::int32_t index = 0;
    std::memcpy(&index, &host[r], sizeof index);
    out[r] = {index, host[static_cast<std::size_t>(n) + r],
              host[2 * static_cast<std::size_t>(n) + r]};
  }
  return out;
}

std::vector<double> CudaModel::router_scores(int recursion, const HiddenStates& states,
                                             std::span<const StateSlot> slots) const {
  Device& d = *device_;
  const DeviceStates& hidden = on_device(states);
  hidden.check_held(slots);
  const Router& router = weights_.routers.at(static_cast<std::size_t>(recursion - 1));
  const auto n = static_cast<std::int64_t>(slots.size());
  std::vector<double> scores(static_cast<std::size_t>(n));
  if (n == 0)
    return scores;
  const profiler::SpanShape shape{.batch_tokens = n};
  float* device_scores = d.scores.reserve(static_cast<std::size_t>(n));
  {
    const DeviceOp label(d, tracer_, {}, shape, "router.kernels", traces::OpKind::router);
    const float* x = gather(hidden, slots);
    kernels::router_scores<float>(x, d.routers[static_cast<std::size_t>(recursion - 1)].get(),
                                  router.bias, device_scores,
                                  {.rows = n, .dim = config_.shape.d_model}, d.stream);
  }
  const DeviceOp wait(d, tracer_, {}, shape, ops::host_sync, traces::OpKind::memcpy);
  std::vector<float> host(static_cast<std::size_t>(n));
  kernels::check_cuda(cudaMemcpyAsync(host.data(), device_scores, sizeof(float) * host.size(),
                                      cudaMemcpyDeviceToHost, d.stream),
                      "cudaMemcpyAsync (router scores)");
  d.sync("cudaStreamSynchronize (router scores)");
  std::copy(host.begin(), host.end(), scores.begin());
  return scores;
}

void CudaModel::sync_kv(KvCache& kv) const {
  Device& d = *device_;
  const std::span<float> values = kv.values();
  const kernels::KvPoolShape shape{kv.kv_width(), kv.block_size(), kv.total_blocks()};
  // No layer has run on this cache's pool yet: it holds no row the device computed.
  if (d.pool_shape.kv_width != shape.kv_width || d.pool_shape.block_size != shape.block_size ||
      d.pool_shape.total_blocks < shape.total_blocks) {
    return;
  }
  with_storage(d.dtype, [&]<typename T>(std::type_identity<T>) {
    std::vector<T> host(values.size());
    kernels::check_cuda(cudaMemcpyAsync(host.data(), d.pool.get<T>(), sizeof(T) * host.size(),
                                        cudaMemcpyDeviceToHost, d.stream),
                        "cudaMemcpyAsync (K/V pool to host)");
    d.sync("cudaStreamSynchronize (K/V pool)");
    std::transform(host.begin(), host.end(), values.begin(),
                   [](T v) { return static_cast<float>(v); });
  });
}

}  // namespace exitsim::engine
