#pragma once

#include <Eigen/Core>
#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "exitsim/engine/cpu_ops.hpp"
#include "exitsim/engine/kv_cache.hpp"
#include "exitsim/engine/linear.hpp"
#include "exitsim/engine/model_config.hpp"
#include "exitsim/engine/model_weights.hpp"
#include "exitsim/profiler/host_profiler.hpp"

namespace exitsim::engine {

// One query row of a layer call: a token of some sequence at some position.
struct LayerRow {
  std::int32_t position = 0;  // rotary position; attends to rows at positions <= this
  int read_stream = -1;       // the K/V stream its attention reads
  // The stream its K/V is appended to before attention (so rows of one call see each other
  // causally). -1: its K/V is not kept (shared_kv's reuse of recursion 1, whose stream already
  // holds the token, or a probe, which attends to its own K/V without storing it).
  int write_stream = -1;
  bool probe = false;
  // Depth-wise batching mixes recursions in one call of the shared block: the recursion whose
  // LoRA this row uses. -1: the layer's own.
  int recursion = -1;
  // Consecutive rows with the same chunk id >= 0 are one prompt chunk of one sequence: their
  // projections run as one matrix-matrix product. Other rows (decode tokens) run through the
  // batch-invariant kernel (see linear.hpp).
  int chunk = -1;
};

using LoraSet = std::array<LinearLora, 7>;  // q, k, v, o, gate, up, down

// Where a layer call records its ops (norms, projections, rotary, K/V writes, attention, MLP)
// as host spans; no profiler: nothing is recorded.
struct OpProfile {
  profiler::HostProfiler* profiler = nullptr;
  std::uint64_t step = 0;  // the engine iteration, for the spans' step id
};

// Where an executed layer of the unrolled model comes from.
struct LayerSource {
  int unique_layer = 0;  // index into ModelWeights::layers
  int recursion = 0;     // 1-based within the shared block; 0 in the prelude and coda
};

// The model's numerics on the CPU, fp32. Every row is computed on its own (matrix-vector
// products, attention per row and head), so a token's result does not depend on which other
// tokens share its call: batching never changes what is decoded. Rows are spread over the
// cores with OpenMP.
class CpuModel {
 public:
  // Keeps references: `config` and `weights` must outlive the model.
  CpuModel(const ModelConfig& config, const ModelWeights& weights);

  const ModelConfig& config() const { return config_; }
  const DepthStructure& depth() const { return config_.shape.depth; }
  // Executed layers: prelude, every recursion of the block, coda.
  int executed_layers() const { return depth().full_depth(); }
  LayerSource source_of(int executed_layer) const;
  std::size_t router_count() const { return weights_.routers.size(); }
  std::int64_t kv_width() const { return config_.shape.n_kv_heads * config_.shape.head_dim; }

  // Rows of embeddings for the tokens.
  Matrix embed(std::span<const std::int32_t> tokens) const;
  // Runs executed layer `layer` over the rows of `x` in place.
  void layer(int layer, Matrix& x, std::span<const LayerRow> rows, KvCache& kv,
             const OpProfile& profile = {}) const;
  // state_copy: appends to each row's write stream the K and V that `layer` computes from x
  // (input norm, K/V projections, rotary), without running the layer.
  void kv_only(int layer, const Matrix& x, std::span<const LayerRow> rows, KvCache& kv,
               const OpProfile& profile = {}) const;
  // Final norm and LM head: one row of logits per row of x.
  Matrix logits(const Matrix& x) const;
  // Recursion r's router score (1-based r) for each row of x: a linear score, squashed by a
  // sigmoid as in Mixture-of-Recursions' expert choice.
  std::vector<double> router_scores(int recursion, const Matrix& x) const;

 private:
  // y = x W^T plus, per row, the LoRA of `adapters[row]` (nullptr: none); `chunks` are the
  // prompt chunks' row ranges.
  void project(const Matrix& w, std::span<const LoraSet* const> adapters, std::size_t linear,
               std::span<const RowRange> chunks, const Matrix& x, Matrix& y) const;
  // Each row's LoRA set for executed layer `layer`.
  void adapters_of(int layer, std::span<const LayerRow> rows,
                   std::vector<const LoraSet*>& out) const;
  void rotate(Matrix& m, std::int64_t heads, std::span<const LayerRow> rows) const;
  void attend(const Matrix& q, const Matrix& k, const Matrix& v, std::span<const LayerRow> rows,
              const KvCache& kv, Matrix& out) const;

  const ModelConfig& config_;
  const ModelWeights& weights_;
  std::vector<float> inv_freq_;  // rotary frequencies, head_dim / 2 of them
};

}  // namespace exitsim::engine
