#pragma once

#include <Eigen/Core>
#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "exitsim/engine/backend.hpp"
#include "exitsim/engine/cpu_ops.hpp"
#include "exitsim/engine/kv_cache.hpp"
#include "exitsim/engine/linear.hpp"
#include "exitsim/engine/model_config.hpp"
#include "exitsim/engine/model_weights.hpp"
#include "exitsim/profiler/host_profiler.hpp"

namespace exitsim::engine {

using LoraSet = std::array<LinearLora, 7>;  // q, k, v, o, gate, up, down

// The model's numerics on the CPU, fp32 (docs/engine.md): prompt chunks through GEMM, decode
// rows through the batch-invariant kernel of linear.hpp, attention per row and head, so a
// token's result does not depend on which other tokens share its call. OpenMP spreads the work
// over the cores.
class CpuModel final : public Backend {
 public:
  // Keeps references: `config` and `weights` must outlive the model.
  CpuModel(const ModelConfig& config, const ModelWeights& weights);

  std::string name() const override { return "cpu"; }
  std::string hardware() const override;
  const ModelConfig& config() const override { return config_; }
  LayerSource source_of(int executed_layer) const override;
  std::size_t router_count() const override { return weights_.routers.size(); }

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
  // A linear score squashed by a sigmoid, as in Mixture-of-Recursions' expert choice.
  std::vector<double> router_scores(int recursion, const HiddenStates& states,
                                    std::span<const StateSlot> slots) const override;

 private:
  // y = x W^T plus, per row, the LoRA of `adapters[row]` (nullptr: none); `chunks` are the
  // prompt chunks' row ranges.
  void project(const Matrix& w, std::span<const LoraSet* const> adapters, std::size_t linear,
               std::span<const RowRange> chunks, const Matrix& x, Matrix& y) const;
  // Each row's LoRA set for executed layer `layer`.
  void adapters_of(int layer, std::span<const LayerRow> rows,
                   std::vector<const LoraSet*>& out) const;
  void rotate(Matrix& m, std::int64_t heads, std::span<const LayerRow> rows) const;
  // The layer on contiguous rows: what layer() runs once it has gathered its slots.
  void layer_rows(int layer, Matrix& x, std::span<const LayerRow> rows, KvCache& kv,
                  profiler::HostProfiler* profiler, const profiler::SpanShape& shape) const;
  void attend(const Matrix& q, const Matrix& k, const Matrix& v, std::span<const LayerRow> rows,
              const KvCache& kv, Matrix& out) const;

  const ModelConfig& config_;
  const ModelWeights& weights_;
  std::vector<float> inv_freq_;  // rotary frequencies (rotary_inv_freq), head_dim / 2 of them
};

}  // namespace exitsim::engine
