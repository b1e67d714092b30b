#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "exitsim/core/model_shape.hpp"
#include "exitsim/sim/cost/cost_model.hpp"
#include "exitsim/sim/cost/cost_profile.hpp"
#include "exitsim/sim/cost/measured_parallel.hpp"
#include "exitsim/sim/cost/roofline.hpp"
#include "exitsim/sim/cost/stack_work.hpp"

namespace exitsim::sim {

// Prices an iteration as the engine that produced the profile runs it (docs/calibration.md):
// a prefill pass (entries with more than one query token) and a decode pass (the rest), each one
// call per executed layer of every layer op at the batch tokens and attention pairs that reach
// that layer, the coda layers for the tokens that run them, embedding, LM head and sampling per
// pass, and the step residual (scheduling and policy work) once. The engine runs on one stream,
// so the iteration's time is the sum. FLOPs and bytes are the roofline's counts.
// Under tensor parallelism (a profile measured at the scenario's parallel.tensor, one GPU's shard
// of each op) every layer call adds two `tp_all_reduce` calls of its tokens and the LM head the
// logits gather; under pipeline parallelism the layers split into stages and the step is the
// roofline's pipeline schedule with `pp_send_recv` hand-offs (docs/cost_model.md, "Measured cost
// models under TP and PP"). What the profile lacks there is priced by the roofline, and said so;
// so is the LM head (final norm, head, sampling) of a profile measured on a base model without
// one (calibrate --kineto of a Hugging Face AutoModel). A profile with step.graph (decode steps a
// framework ran as CUDA-graph replays) prices decode-only iterations as that fit of their
// sequences, whole, and says so.
class CalibratedCostModel final : public CostModel, private StagePricer {
 public:
  // Throws InputError (naming the profile and `cost_model.profile`) when the profile was fitted
  // on another model shape, or lacks an op every iteration needs; naming `parallel.tensor` when
  // it was measured at another tensor-parallel degree than `parallel`'s.
  // The profile is shared read-only (every replica of every run of a sweep prices from one).
  CalibratedCostModel(std::shared_ptr<const CostProfile> profile, std::string profile_path,
                      const ModelShape& model, const ParallelPricing& parallel = {});
  CalibratedCostModel(CostProfile profile, std::string profile_path, const ModelShape& model,
                      const ParallelPricing& parallel = {});

  std::string name() const override { return "calibrated"; }
  IterationCost iteration_cost(std::span<const BatchEntry> batch) const override;

  const CostProfile& profile() const { return *profile_; }
  std::span<const double> step_variability() const override { return profile_->step_variability; }
  // Ops priced by a stated stand-in because the profile lacks them, one line each; the CLI and
  // the report print them (never a silent zero).
  const std::vector<std::string>& fallbacks() const { return fallbacks_; }
  // The fallbacks, then per op the calls priced outside its fitted batch range and the regimes
  // priced as a mean; where the roofline priced anything (ops the profile fitted to it, and
  // collectives, the logits gather or hand-offs it lacks), which ops were measured and which not.
  std::vector<std::string> notes() const override;

 private:
  // Fills passes_ from the entries of `batch` with query tokens; returns whether any entry has
  // masked layers.
  bool collect_passes(std::span<const BatchEntry> batch) const;
  // With PP: the roofline's pipeline step over stage_us and hand_off_us, then the residual.
  IterationCost pipeline_cost(std::span<const BatchEntry> batch) const;
  void stage_us(std::span<const BatchEntry> part, std::span<double> stage_us) const override;
  double hand_off_us(std::size_t boundary, std::int64_t tokens) const override;
  // With TP: one all-reduce of a layer's partial sums for `tokens` tokens.
  double all_reduce_us(std::int64_t tokens) const;
  // The LM head, the logits gather (with TP) and sampling of `emitting` tokens.
  double head_us(std::int64_t emitting) const;
  // Microseconds of one call of every layer op at b tokens and c attention pairs, plus the K/V
  // projections of `kv_only` copied states.
  // `prefill`: a prefill pass's call, priced by the ops' ".prefill" fits where the profile has
  // them (an op grid), else by the same fits as decode calls.
  double layer_us(std::int64_t b, std::int64_t c, std::int64_t kv_only, bool prefill) const;
  // One call of `op` (an element of profile_.ops), counted for notes().
  double price(const OpFit* op, double batch, double context) const;
  // Counts one call of op `index` at (batch, context) off its measured range, for notes().
  void note_off_range(std::size_t index, double batch, double context) const;
  // The price of one call, without counting it: refused (InputError) past an iteration's bound.
  double checked_us(std::size_t index, double batch, double context) const;

  struct OpUse {
    std::int64_t calls = 0;
    std::int64_t outside_range = 0;   // batch below batch_min_seen or above batch_max_seen
    double largest = 0;               // largest such batch
    std::int64_t beyond_context = 0;  // context above context_max_seen
    double largest_context = 0;
  };

  std::shared_ptr<const CostProfile> profile_;
  std::string profile_path_;  // named by a refused price
  // The ten layer ops of one pass kind, called together: their calls are counted once per
  // layer call (notes() hands the count to each op), each op's own range is checked only for a
  // call outside the range all ten were measured in, and the last call's price is kept, since
  // consecutive calls (a pass's layers, then its coda) often ask for the same one.
  struct LayerFits {
    std::array<const OpFit*, 10> ops{};
    std::array<std::size_t, 10> index{};  // into profile_.ops
    double batch_lo = 0;                  // every op was measured at batches in [lo, hi]
    double batch_hi = 0;
    double context_hi = 0;  // no context-reading op was measured beyond it
    mutable std::int64_t calls = 0;
    mutable double last_batch = -1;
    mutable double last_context = -1;
    mutable double last_us = 0;
  };
  double layer_ops_us(const LayerFits& fits, double batch, double context) const;
  // [0] decode, [1] prefill: the ".prefill" fits, else the decode ones.
  std::array<LayerFits, 2> layer_fits_;
  const OpFit* kv_only_ = nullptr;          // nullptr: priced as qkv_proj x kv_only_share_
  const OpFit* prefill_kv_only_ = nullptr;  // the ".prefill" fit, else kv_only_
  double kv_only_share_ = 0;
  const OpFit* embed_ = nullptr;
  // nullptr (both): a profile of a base model without an LM head; MeasuredParallel::head_us
  // prices the final norm, head and sampling by the roofline, and notes() says so.
  const OpFit* lm_head_ = nullptr;
  const OpFit* sampling_ = nullptr;
  const OpFit* residual_ = nullptr;  // nullptr: no residual measured (0, named in fallbacks)
  // step.graph: whole decode steps that ran as CUDA-graph replays (calibrate --kineto), by their
  // sequences; nullptr: none measured.
  const OpFit* graph_step_ = nullptr;
  // The sequences of an iteration such a replay prices whole (every entry decoding one token
  // through the whole stack and emitting it, no pipeline); 0 for any other iteration.
  std::int64_t graph_sequences(std::span<const BatchEntry> batch) const;
  std::vector<std::string> fallbacks_;
  mutable std::vector<OpUse> uses_;  // by index into profile_.ops; the model prices one replica
  // Per op (by index into profile_.ops): whether no regime of its fit reads the context, so its
  // price is a function of the batch alone; and whether its first regime reads it (the calls
  // counted as beyond the measured context).
  std::vector<std::uint8_t> context_free_;
  std::vector<std::uint8_t> reads_context_;
  // Prices of a context-free op by batch below k_batch_table, filled as they are first asked
  // for (negative: not yet). An iteration asks for the same few batches again and again, and
  // a table entry is the very double predict_us gives.
  static constexpr std::size_t k_batch_table = 1024;
  mutable std::vector<std::vector<double>> batch_prices_;
  // The work of each pass by layer ([0] decode, [1] prefill: entries of one query token and of
  // more), kept so that an iteration allocates nothing.
  mutable std::array<LayerBatches, 2> passes_;
  mutable std::vector<double> prefill_layer_us_;  // the prefill pass's price of each layer
  RooflineCostModel counts_;
  StackLayout layout_;
  int coda_layers_ = 0;
  // Tensor and pipeline parallelism: the measured collectives and hand-offs (nullptr: priced by
  // the roofline) and the calls the roofline priced, for notes().
  MeasuredParallel parallel_;
  const OpFit* all_reduce_ = nullptr;
  std::array<const OpFit*, 2> send_recv_{};  // [0] within a node, [1] between nodes
  enum RooflineUse : std::uint8_t {
    all_reduce_use,
    gather_use,
    hand_off_use,
    remote_use,
    head_use
  };
  mutable std::array<std::int64_t, k_roofline_stand_ins> roofline_calls_{};
};

}  // namespace exitsim::sim
