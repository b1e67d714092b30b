#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "exitsim/engine/backend.hpp"
#include "exitsim/engine/model_config.hpp"
#include "exitsim/engine/model_weights.hpp"
#include "exitsim/kernels/dtype.hpp"
#include "exitsim/profiler/cupti_tracer.hpp"

namespace exitsim::engine {

class DeviceStates;

// The model's numerics on an NVIDIA GPU (docs/gpu.md), fp32: the same Backend the CPU model
// implements, so the decoding loop, its policies and strategies are the CPU engine's own. Weights
// live on the device (q|k|v and gate|up stacked, one GEMM each, through cuBLAS), and so do the
// hidden states (make_states: a device array of slots the loop names) and the K/V pool, slot for
// slot the KvCache's (KvCache::slot), so attention reads it where the loop's bookkeeping says the
// rows are. Layer calls enqueue work and return; the host waits for the device only where the
// loop takes a decision there — after the head's logits and the routers' scores — and that wait
// is recorded as its own op ("host_sync"), the bottleneck the simulator models.
//
// Profiling: with a CUPTI tracer, every op's launches are labelled (CuptiOpScope) and the
// tracer's rows time them on the device; with only a host profiler, each op synchronizes at its
// end so that its host span is its device time.
class CudaModel final : public Backend {
 public:
  // Uploads the weights (and any per-recursion LoRA) to device `device`. Throws InputError
  // (field "cuda") when there is no usable device. `storage`: what weights, K/V and the matrix
  // products' operands are kept in. fp32 matches the CPU backend to float rounding (token parity);
  // fp16/bf16 halve the bytes a decode step moves, with the residual stream, norms, softmax and
  // every accumulation still fp32.
  CudaModel(const ModelConfig& config, const ModelWeights& weights, int device = 0,
            kernels::Dtype storage = kernels::Dtype::fp32);
  ~CudaModel() override;
  CudaModel(const CudaModel&) = delete;
  CudaModel& operator=(const CudaModel&) = delete;

  std::string name() const override { return "cuda"; }
  kernels::Dtype storage() const;
  std::string hardware() const override;  // the device and storage, e.g. "NVIDIA H200 (bf16)"
  const ModelConfig& config() const override { return config_; }
  LayerSource source_of(int executed_layer) const override;
  std::size_t router_count() const override { return weights_.routers.size(); }

  // The store's rows live on this device; it must not outlive the model.
  std::unique_ptr<HiddenStates> make_states() const override;
  void embed(std::span<const std::int32_t> tokens, HiddenStates& states,
             std::span<const StateSlot> into) const override;
  void layer(int layer, HiddenStates& states, std::span<const StateSlot> slots,
             std::span<const LayerRow> rows, KvCache& kv,
             const OpProfile& profile = {}) const override;
  void kv_only(int layer, const HiddenStates& states, std::span<const StateSlot> slots,
               std::span<const LayerRow> rows, KvCache& kv,
               const OpProfile& profile = {}) const override;
  Matrix logits(const HiddenStates& states, std::span<const StateSlot> slots) const override;
  std::vector<Top2Confidence> top2(const HiddenStates& states, std::span<const StateSlot> slots,
                                   bool probabilities) const override;
  std::vector<double> router_scores(int recursion, const HiddenStates& states,
                                    std::span<const StateSlot> slots) const override;
  void sync_kv(KvCache& kv) const override;
  bool kv_in_host_cache() const override { return false; }

  // Labels every op's launches for this tracer from now on (nullptr: none).
  void set_tracer(profiler::CuptiTracer* tracer) { tracer_ = tracer; }

  struct Device;

 private:
  // The store as this model's (throws std::logic_error for another backend's).
  DeviceStates& on_device(HiddenStates& states) const;
  const DeviceStates& on_device(const HiddenStates& states) const;
  const float* gather(const DeviceStates& hidden, std::span<const StateSlot> slots) const;
  void enqueue_head(const DeviceStates& hidden, std::span<const StateSlot> slots) const;
  profiler::SpanShape timed_shape(int layer, int recursion, std::span<const LayerRow> rows,
                                  const KvCache& kv, const OpProfile& profile) const;

  const ModelConfig& config_;
  const ModelWeights& weights_;
  std::unique_ptr<Device> device_;
  profiler::CuptiTracer* tracer_ = nullptr;
};

}  // namespace exitsim::engine
