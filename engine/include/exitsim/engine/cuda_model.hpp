#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "exitsim/engine/backend.hpp"
#include "exitsim/engine/model_config.hpp"
#include "exitsim/engine/model_weights.hpp"
#include "exitsim/profiler/cupti_tracer.hpp"

namespace exitsim::engine {

// The model's numerics on an NVIDIA GPU (docs/gpu.md), fp32: the same Backend the CPU model
// implements, so the decoding loop, its policies and strategies are the CPU engine's own. Weights
// live on the device (q|k|v and gate|up stacked, one GEMM each, through cuBLAS); the K/V pool is
// mirrored on the device slot for slot (KvCache::slot), so attention reads it where the loop's
// bookkeeping says the rows are. Hidden states cross the Backend interface as host rows: each
// layer call uploads them and downloads the result, and the K/V rows it writes come back to the
// host KvCache (its values feed observers and deferred-fill checks). That download is the
// call's one host-device synchronization, recorded as its own op ("host_sync").
//
// Profiling: with a CUPTI tracer, every op's launches are labelled (CuptiOpScope) and the
// tracer's rows time them on the device; with only a host profiler, each op synchronizes at its
// end so that its host span is its device time.
class CudaModel final : public Backend {
 public:
  // Uploads the weights to device `device`. Throws InputError (field "cuda") when there is no
  // usable device, and (field "model") for what this backend does not run yet: LoRA.
  CudaModel(const ModelConfig& config, const ModelWeights& weights, int device = 0);
  ~CudaModel() override;
  CudaModel(const CudaModel&) = delete;
  CudaModel& operator=(const CudaModel&) = delete;

  std::string name() const override { return "cuda"; }
  std::string hardware() const override;  // the device's name, e.g. "NVIDIA H200"
  const ModelConfig& config() const override { return config_; }
  LayerSource source_of(int executed_layer) const override;
  std::size_t router_count() const override { return weights_.routers.size(); }

  Matrix embed(std::span<const std::int32_t> tokens) const override;
  void layer(int layer, Matrix& x, std::span<const LayerRow> rows, KvCache& kv,
             const OpProfile& profile = {}) const override;
  void kv_only(int layer, const Matrix& x, std::span<const LayerRow> rows, KvCache& kv,
               const OpProfile& profile = {}) const override;
  Matrix logits(const Matrix& x) const override;
  std::vector<double> router_scores(int recursion, const Matrix& x) const override;

  // Labels every op's launches for this tracer from now on (nullptr: none).
  void set_tracer(profiler::CuptiTracer* tracer) { tracer_ = tracer; }

  struct Device;

 private:
  profiler::SpanShape timed_shape(int layer, int recursion, std::span<const LayerRow> rows,
                                  const KvCache& kv, const OpProfile& profile) const;

  const ModelConfig& config_;
  const ModelWeights& weights_;
  std::unique_ptr<Device> device_;
  profiler::CuptiTracer* tracer_ = nullptr;
};

}  // namespace exitsim::engine
