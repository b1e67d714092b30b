#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "exitsim/core/hardware.hpp"
#include "exitsim/core/model_shape.hpp"
#include "exitsim/sim/cost/cost_model.hpp"
#include "exitsim/sim/cost/op_graph.hpp"

namespace exitsim::sim {

struct RooflineEfficiency {
  double flops = 0.7;       // fraction of peak FLOP/s the ops reach
  double bandwidth = 0.85;  // fraction of peak memory bandwidth
};

// Batch aggregates that every op's FLOPs and bytes are linear in. One vector describes the batch
// one layer sees (the entries deep enough to run it).
enum class BatchFeature : std::uint8_t {
  tokens,          // T: query tokens of all entries
  decode_seqs,     // entries with one query token
  decode_kv,       // sum over decode entries of (context + 1): K/V tokens their attention reads
  prefill_tokens,  // query tokens of entries with more than one
  prefill_pairs,   // sum over prefill entries of q*c + q(q+1)/2: causal (query, key) pairs
  prefill_kv,      // sum over prefill entries of (c + q): K/V tokens their attention reads
  emitting,        // entries whose last token produces an output token
};
inline constexpr std::size_t k_batch_feature_count = 8;  // padded for vectorisation
using BatchFeatures = std::array<double, k_batch_feature_count>;

// One op's work as a linear function of the batch features (CUTLASS-style precomputed params):
// FLOPs = sum of flops x feature, bytes = fixed_bytes + sum of bytes x feature, over a few
// terms (no op depends on more than three features, so pricing is a handful of multiply-adds).
// The op launches only when x[launch_if] > 0.
struct OpParams {
  struct Term {
    BatchFeature feature = BatchFeature::tokens;
    double flops = 0;  // per unit of the feature
    double bytes = 0;
  };
  static constexpr std::size_t k_max_terms = 3;
  std::array<Term, k_max_terms> terms{};  // unused terms have zero coefficients
  std::size_t used_terms = 0;
  double fixed_bytes = 0;  // weights, read once per launch
  BatchFeature launch_if = BatchFeature::tokens;

  // Adds to the coefficients of `feature`. Throws std::logic_error past k_max_terms features.
  void add(BatchFeature feature, double flops, double bytes);
};

// One priced op of the unrolled iteration.
struct OpCost {
  OpKind kind = OpKind::input_norm;
  int layer = -1;  // executed-layer index (stack then coda); -1 for the head ops
  bool launched = false;
  bool compute_bound = false;
  double duration_ns = 0;  // including launch overhead when launched
  double flops = 0;
  double bytes = 0;
};

// Roofline pricing of one iteration. Each op costs max(FLOPs / (peak x flops efficiency),
// bytes / (bandwidth x bandwidth efficiency)) + launch overhead, and the iteration costs the
// longest path through its op graph: a per-layer template (identical for every layer, so it is
// built and sorted once) evaluated per group of layers that see the same batch, then the head.
class RooflineCostModel final : public CostModel {
 public:
  // Throws InputError for efficiencies outside (0, 1], a hardware spec without a peak for the
  // model's dtype or without bandwidth, or an inconsistent model shape.
  RooflineCostModel(const ModelShape& model, const HardwareSpec& hardware,
                    RooflineEfficiency efficiency);

  std::string name() const override { return "roofline"; }
  // Allocation-free. Entries with no query tokens are ignored; depths are clamped to
  // [0, stacked depth].
  IterationCost iteration_cost(std::span<const BatchEntry> batch) const override;

  // Every op of the unrolled iteration priced one layer at a time, straight from the entries (no
  // aggregation by depth): for timelines and as the reference the fast path is tested against.
  std::vector<OpCost> op_breakdown(std::span<const BatchEntry> batch) const;

  const OpGraph& layer_graph() const { return layer_graph_; }
  const OpGraph& head_graph() const { return head_graph_; }

 private:
  struct GraphTotals;
  struct Priced;

  Priced price(const OpParams& params, const BatchFeatures& x) const;
  void add_graph(const OpGraph& graph, const OpParams* params, const BatchFeatures& x,
                 double repeat, GraphTotals& totals) const;
  // Layers [first, last) of the stack, each seeing the batch `x`.
  void add_stack_layers(int first, int last, const BatchFeatures& x, GraphTotals& totals) const;
  void add_stack_by_sweep(std::span<const BatchEntry> batch, GraphTotals& totals) const;
  int clamp_depth(int depth) const;

  OpGraph layer_graph_;
  OpGraph head_graph_;
  // layer_params_[variant * layer_graph_.size() + op]; variant 0 has no LoRA, the others one
  // per distinct LoRA rank of the shared block.
  std::vector<OpParams> layer_params_;
  std::vector<OpParams> head_params_;
  // variant_prefix_[variant * (stacked + 1) + l]: stack layers below l that use the variant.
  std::vector<int> variant_prefix_;
  int variants_ = 1;
  int stacked_depth_ = 0;
  int coda_layers_ = 0;
  double ns_per_flop_ = 0;
  double ns_per_byte_ = 0;
  double launch_ns_ = 0;
};

}  // namespace exitsim::sim
