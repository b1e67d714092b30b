#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "exitsim/core/hardware.hpp"
#include "exitsim/core/model_shape.hpp"
#include "exitsim/core/parallel.hpp"
#include "exitsim/sim/cost/cost_model.hpp"
#include "exitsim/sim/cost/op_graph.hpp"
#include "exitsim/sim/cost/price_cache.hpp"
#include "exitsim/sim/cost/stack_work.hpp"

namespace exitsim::sim {

struct RooflineEfficiency {
  double flops = 0.7;       // fraction of peak FLOP/s the ops reach
  double bandwidth = 0.85;  // fraction of peak memory bandwidth
};

// What set one op's price: the larger of its compute and memory times, a floor a real kernel
// never goes below, or a collective's link time (docs/cost_model.md, "Kernel corrections").
enum class PriceBound : std::uint8_t {
  none,             // not launched
  compute,          // FLOPs at the flops efficiency's share of peak
  memory,           // bytes at the bandwidth efficiency's share of peak
  kernel_floor,     // the shortest time of any kernel (hardware.min_kernel_us)
  attention_floor,  // decode attention's shortest time (hardware.decode_attention_floor_us)
  collective,       // bytes over the link at its efficiency, plus the collective's latency
};
std::string_view to_string(PriceBound bound);

// One op's work as a linear function of the batch features (CUTLASS-style precomputed params):
// FLOPs = sum of flops x feature, bytes = fixed_bytes + sum of bytes x feature, over a few
// terms (no op depends on more than four features, so pricing is a handful of multiply-adds).
// The op launches only when x[launch_if] > 0. Coefficients may be negative: they remove work
// (K/V projections and writes) that a feature's tokens skip.
struct OpParams {
  struct Term {
    BatchFeature feature = BatchFeature::tokens;
    double flops = 0;  // per unit of the feature
    double bytes = 0;
  };
  static constexpr std::size_t k_max_terms = 4;
  std::array<Term, k_max_terms> terms{};  // unused terms have zero coefficients
  std::size_t used_terms = 0;
  double fixed_bytes = 0;  // weights, read once per launch
  // A mixture of experts' MLP: the weights of all its experts (one GPU's shard of each), of
  // which a batch of T tokens reads the expected distinct experts' share,
  // 1 - expert_miss^T, with expert_miss = 1 - top_k / experts (uniform routing;
  // expected_distinct_experts). The one term not linear in the features: it depends on the
  // token count alone.
  double routed_weight_bytes = 0;
  double expert_miss = 1;
  // Under expert parallelism the step waits for the GPU whose experts got the most of the
  // batch's T x top_k assignments: FLOPs and activation bytes scale by the expected busiest
  // GPU's load over the mean, min(1 + expert_imbalance / sqrt(T), expert_imbalance_cap)
  // (expert_load_imbalance). 0: no EP.
  double expert_imbalance = 0;
  double expert_imbalance_cap = 1;
  // The part of the tokens term's FLOPs and bytes (per token) that every GPU of the EP group does
  // alike, which the busiest GPU's share does not scale: a mixture's shared experts.
  double balanced_flops = 0;
  double balanced_bytes = 0;
  BatchFeature launch_if = BatchFeature::tokens;
  // A collective of the tensor-parallel group: its bytes are what one GPU sends over the link
  // (not memory traffic), priced bytes x ns_per_byte + fixed_ns, with no FLOPs.
  bool collective = false;

  // How the op's work becomes time, set by the cost model from the op's class and the hardware
  // (docs/cost_model.md, "Kernel corrections"): the time of a FLOP and of a byte, the kernel's
  // fixed time (a collective's latency), and a time per unit of one feature.
  double ns_per_flop = 0;
  double ns_per_byte = 0;
  double fixed_ns = 0;
  BatchFeature timed_feature = BatchFeature::tokens;
  double ns_per_unit = 0;
  // What a price set by the fixed and per-unit times is reported as, and the scenario keys that
  // set each part (OpCost::parameter).
  PriceBound fixed_bound = PriceBound::kernel_floor;
  std::string_view compute_parameter;
  std::string_view memory_parameter;
  std::string_view fixed_parameter;

  // Adds to the coefficients of `feature`. Throws std::logic_error past k_max_terms features.
  void add(BatchFeature feature, double flops, double bytes);
};

// One priced op of the unrolled iteration.
struct OpCost {
  OpKind kind = OpKind::input_norm;
  int layer = -1;  // executed-layer index (stack then coda); -1 for the head ops
  bool launched = false;
  bool compute_bound = false;
  bool communication = false;  // a collective over the link
  double duration_ns = 0;      // including launch overhead when launched
  double flops = 0;
  double bytes = 0;
  double masked_flops = 0;  // part of `flops` on layers above entries' useful depth
  PriceBound bound = PriceBound::none;
  // The scenario keys of the parameters that set the price, e.g. "cost_model.flops_efficiency"
  // (static text; empty when not launched).
  std::string_view parameter;
  double launch_ns = 0;  // the part of duration_ns that is launch overhead
};

// Roofline pricing of one iteration. Each op costs its compute time FLOPs / (peak x flops
// efficiency) and memory time bytes / (bandwidth x bandwidth efficiency) blended across the ridge,
// plus its kernel's fixed time (and decode attention's per-sequence term), plus launch overhead,
// at the efficiencies and kernel corrections of its class (OpRates, docs/cost_model.md, "Kernel
// corrections"; without corrections, max(compute, memory) + launch), and the iteration costs the
// longest path through its op graph: a per-layer template (identical for every layer, so it is
// built and sorted once) evaluated per group of layers that see the same batch, then the head.
// A mixture of experts' layer adds the router and prices its MLP as the experts its tokens are
// routed to: weights of the expected distinct experts, FLOPs of top_k experts per token.
// Under tensor parallelism every op is one GPU's shard (TensorShard) and the graphs gain the
// collectives on stream 1, each priced as the collective's fixed latency plus its bus bytes at the
// link's efficiency: an all-reduce of N bytes sends 2(p-1)/p N, a gather (p-1)/p N.
// Under pipeline parallelism the iteration is priced as vLLM's virtual engines run it
// (docs/cost_model.md, "Pipeline parallelism"): the batch splits into m = min(stages, sequences)
// micro-batches balanced by tokens, each runs the stages in order with an activation hand-off
// between them, and the micro-batches cycle through the stages, so that the step takes
// max(the busiest stage's time summed over the micro-batches, the longest micro-batch's trip
// through every stage and hand-off).
class RooflineCostModel final : public CostModel {
 public:
  // Throws InputError for efficiencies outside (0, 1], a hardware spec without a peak for the
  // model's dtype or without bandwidth, or an inconsistent model shape.
  // Also for a split `find_parallel_problem` or `find_link_problem` refuses.
  // `exit_probes`: the exit policy decides by confidence, so every decode token running at an
  // exit point below the stack's top is probed there (build_probe_graph), until it exits.
  // `scope`: block_only prices the recursion block's layers alone (TimingScope); it prices no
  // probes, and a split with pipeline stages is refused for it (make_cost_model).
  RooflineCostModel(const ModelShape& model, const HardwareSpec& hardware,
                    RooflineEfficiency efficiency, ParallelSpec parallel = {},
                    bool exit_probes = false, TimingScope scope = TimingScope::whole_step);

  // A model that counts work only, for the measured cost models (calibrated, table): its
  // iteration_cost gives the FLOPs, bytes and masked FLOPs a roofline model of the same shape
  // gives, with every time 0, and costs less since no op's time or the layer's path is worked out.
  // `parallel`: counts as a roofline of that split counts them (one GPU's shard of each op, every
  // stage's work).
  static RooflineCostModel counting(const ModelShape& model, ParallelSpec parallel = {},
                                    TimingScope scope = TimingScope::whole_step);

  // For a measured cost model that sums the batch of each stack layer itself (calibrated): what
  // iteration_cost counts (FLOPs and bytes) for the stack layers [first, last) seeing the batch
  // `run`, and for the coda and head run by `all` with `emitting` output tokens, added to
  // `counts`. Summed over a batch's layers they give iteration_cost's FLOPs exactly when
  // counts_regroup_exactly() and the sum stays below 2^53 (bytes up to rounding); masked FLOPs
  // are not counted.
  void count_stack_layers(int first, int last, const WorkCounts& run, IterationCost& counts) const;
  void count_coda_and_head(const WorkCounts& all, std::int64_t emitting,
                           IterationCost& counts) const;
  // Every FLOP term an integer, on one stage, with no mixture-of-experts scaling and no probes:
  // FLOPs are then sums of integers, which any grouping of the layers gives alike.
  bool counts_regroup_exactly() const { return counts_regroup_exactly_; }

  std::string name() const override { return "roofline"; }
  // The timing scope's note when it is block_only (timing_scope_note).
  std::vector<std::string> notes() const override;
  // Allocation-free. Entries with no query tokens are ignored; depths are clamped to
  // [0, stacked depth], start_depth, pending_from_depth and useful_depth to [0, depth] and
  // kv_only_depth to [depth, stacked depth].
  IterationCost iteration_cost(std::span<const BatchEntry> batch) const override;

  // Every op of the unrolled iteration (of the timing scope) priced one layer at a time, straight
  // from the entries (no aggregation by depth): for timelines and as the reference the fast path is
  // tested against.
  std::vector<OpCost> op_breakdown(std::span<const BatchEntry> batch) const;
  // One op priced alone for the batch features `x` (a layer op without LoRA, the K/V-only
  // projection, a head, collective or probe op; launch included), as op_breakdown prices it:
  // what a measured cost model takes from the roofline for an op it did not measure (the
  // collectives, the LM head). Throws std::logic_error for an op this model's graphs do not
  // hold (tp_all_reduce without TP).
  OpCost op_cost(OpKind kind, const BatchFeatures& x) const;
  // The hand-off after pipeline stage `stage` (0-based, not the last) of `tokens` tokens'
  // activations, in nanoseconds with its launch, as the pipeline's step prices it.
  double hand_off_ns(std::size_t stage, double tokens) const;

  const OpGraph& layer_graph() const { return layer_graph_; }
  const OpGraph& head_graph() const { return head_graph_; }
  const OpGraph& probe_graph() const { return probe_graph_; }

 private:
  // The general pricing (roofline.cpp) is the reference; the shortcuts that give its doubles
  // faster (roofline_fast.cpp, roofline_cache.cpp) are marked "Shortcut" here and documented in
  // docs/cost_model.md, "Speed".

  // Where an op's body time goes in an iteration's parts (IterationCost).
  enum class PathPart : std::uint8_t { not_launched, memory, compute, collective };
  static constexpr std::size_t k_path_parts = 4;
  using PartTimes = std::array<double, k_path_parts>;  // by PathPart; not_launched stays 0

  struct GraphTotals {
    // Counting: every op in add_graph's sum order, not the launch classes' sums (counts past
    // 2^53).
    bool ordered = false;
    double total = 0;
    double compute = 0;
    double memory = 0;
    double communication = 0;
    double overhead = 0;
    double flops = 0;
    double bytes = 0;
    double masked_flops = 0;

    void add(const GraphTotals& other) {
      total += other.total;
      compute += other.compute;
      memory += other.memory;
      communication += other.communication;
      overhead += other.overhead;
      flops += other.flops;
      bytes += other.bytes;
      masked_flops += other.masked_flops;
    }
    // One graph's critical path of `length` (the body times on it by part, and the launches on
    // it), `repeat` times: as many layers.
    void add_path(double repeat, double length, const PartTimes& body, double launches,
                  double path_flops, double path_bytes) {
      total += repeat * length;
      compute += repeat * body[static_cast<std::size_t>(PathPart::compute)];
      memory += repeat * body[static_cast<std::size_t>(PathPart::memory)];
      communication += repeat * body[static_cast<std::size_t>(PathPart::collective)];
      overhead += repeat * launches;
      flops += repeat * path_flops;
      bytes += repeat * path_bytes;
    }
  };
  // Executed layers [first, last) (stack then coda), and whether the head runs here: one
  // pipeline stage, or the whole model.
  struct LayerWindow {
    int first = 0;
    int last = 0;
    bool head = true;
  };
  // One op priced for one batch.
  struct Priced {
    double body_ns = 0;  // max(compute time, memory time)
    double duration_ns = 0;
    double flops = 0;
    double bytes = 0;
    bool launched = false;
    bool compute_bound = false;
    bool communication = false;

    PathPart part() const {
      if (!launched)
        return PathPart::not_launched;
      return communication   ? PathPart::collective
             : compute_bound ? PathPart::compute
                             : PathPart::memory;
    }
  };
  // A chain graph's sums over its ops in a sum order (walk_graph): its length (the durations'
  // sum), FLOPs, bytes, launched ops' body times by part and their launch overhead, and whether
  // every body was non-negative, which the chain argument needs (NaN fails it).
  struct ChainPathSums {
    double length = 0;
    double flops = 0;
    double bytes = 0;
    PartTimes body{};
    double overhead = 0;
    bool nonnegative = true;

    // Every op adds to every part (zero where it is not of that part) rather than to the one
    // its part indexes: with two other changes 0.89-0.94x on cost_model_bench (292cf98).
    void add(const Priced& p, double launch_ns) {
      length += p.duration_ns;
      flops += p.flops;
      bytes += p.bytes;
      nonnegative = nonnegative && p.body_ns >= 0;
      const PathPart k = p.part();
      body[static_cast<std::size_t>(PathPart::memory)] += k == PathPart::memory ? p.body_ns : 0.0;
      body[static_cast<std::size_t>(PathPart::compute)] += k == PathPart::compute ? p.body_ns : 0.0;
      body[static_cast<std::size_t>(PathPart::collective)] +=
          k == PathPart::collective ? p.body_ns : 0.0;
      overhead += k != PathPart::not_launched ? launch_ns : 0.0;
    }
  };

  // Shortcut (counting models): a graph's FLOPs and bytes when counts_regroup_exactly_, its ops'
  // terms merged per launch condition (x[launch] > 0), so that an op graph is a few dot
  // products.
  struct LaunchClass {
    std::size_t launch = 0;  // feature index
    double fixed_bytes = 0;
    std::array<std::uint8_t, k_batch_feature_count> feature{};  // the first `terms` are used
    std::array<double, k_batch_feature_count> flops{};
    std::array<double, k_batch_feature_count> bytes{};
    std::size_t terms = 0;
  };
  using LinearCounts = std::vector<LaunchClass>;
  static LinearCounts linear_counts(std::span<const OpParams> params);
  // add_graph's FLOPs and bytes from the launch classes of `params`' graph.
  void count_by_launch_class(const OpGraph& graph, const OpParams* params, const BatchFeatures& x,
                             double repeat, GraphTotals& totals) const;

  // Layer groups of up to this many tokens (K/V-only tokens, decode heads) take their prices
  // from the price cache.
  static constexpr std::size_t k_token_table = 64;
  // Shortcut: prices computed once, at construction, by price() and add_graph() themselves, so
  // that a lookup gives the same doubles. One rule decides where each applies (PriceTableKey):
  // the op reads only the features of its table's key.
  struct PriceCache {
    // The layer ops that read only the token count (the K/V reuse features, zero outside
    // shared_kv, aside): all but attention, mostly. token_only[op] marks them, and
    // token_prices[(variant * k_token_table + tokens) * layer ops + op] holds their prices.
    // measured: decode/1 1.77x, decode/16 1.57x slower on cost_model_bench without.
    PriceTableKey token_key{{BatchFeature::tokens},
                            {BatchFeature::kv_reuse_tokens, BatchFeature::kv_reuse_all}};
    std::vector<std::uint8_t> token_only;
    std::vector<Priced> token_prices;
    // For a chain layer graph, per row of token_prices: walk_graph's sums over the token-only
    // ops (they come first in the layer's sum order), so that a group of a tabled size prices
    // only the rest. Empty when the layer graph is not a chain. measured: decode/1 1.09x without.
    std::vector<ChainPathSums> chain_prefixes;
    // kv_prices[variant * k_token_table + tokens]: state_copy's K/V-only projection, when it
    // reads only its token count (and whether they are alone, which must be 0); else empty.
    // measured: state_copy 1.02x (1.006-1.034) slower without (with the head's, below).
    PriceTableKey kv_key{{BatchFeature::kv_only_tokens}, {BatchFeature::kv_only_alone}};
    std::vector<Priced> kv_prices;
    // head_totals[t]: the head graph's totals for t tokens that all emit (a decode batch), when
    // the head reads only those two counts; else empty. measured: decode/1 1.48x without.
    PriceTableKey head_key{{BatchFeature::tokens, BatchFeature::emitting}, {}};
    std::vector<GraphTotals> head_totals;
  };
  // Fills cache_ (and layer_sum_order_, whose first part is the token-only ops).
  void build_price_cache();
  // The row of token_prices for the variant's ops at x, nullptr when x is outside its key.
  const Priced* token_row(std::size_t variant, const BatchFeatures& x) const;
  // kv_params_[variant]'s cached price for the batch x, nullptr when the cache has none.
  const Priced* kv_tabled(std::size_t variant, const BatchFeatures& x) const;
  // add_graph for the layer graph from a cached row; false (nothing added) when the chain
  // argument fails, for the graph walk to decide.
  bool add_cached_chain(const Priced* tabled, const OpParams* params, const BatchFeatures& x,
                        double repeat, GraphTotals& totals) const;

  // Construction, in steps.
  void check_inputs(const ModelShape& model, const HardwareSpec& hardware,
                    const RooflineEfficiency& efficiency, const ParallelSpec& parallel) const;
  void build_stages(const ModelShape& model, const HardwareSpec& hardware,
                    const RooflineEfficiency& efficiency, const ParallelSpec& parallel);
  // The layer variants, every op's params, the exit probes and variant_prefix_.
  void build_params(const ModelShape& model, const HardwareSpec& hardware,
                    const RooflineEfficiency& efficiency, const ParallelSpec& parallel,
                    bool exit_probes);

  Priced price(const OpParams& params, const BatchFeatures& x) const;
  // op_breakdown's entry for one op: its price, what bound it and the parameters that did.
  OpCost describe(OpKind kind, int layer, const OpParams& params, const BatchFeatures& x,
                  const BatchFeatures& masked) const;
  // The work of `batch` inside `window`, added to `totals`.
  void price_window(std::span<const BatchEntry> batch, const LayerWindow& window,
                    GraphTotals& totals) const;
  static IterationCost to_cost(const GraphTotals& totals);
  IterationCost pipeline_cost(std::span<const BatchEntry> batch) const;
  // `tabled`: the cached row of the layer ops at x (token_row), nullptr for none.
  void add_graph(const OpGraph& graph, const OpParams* params, const Priced* tabled,
                 const BatchFeatures& x, double repeat, GraphTotals& totals) const;
  // add_graph's general path: every op priced (from `tabled`, where it holds the op; may be
  // null); a chain's length is the sum of their durations, any other graph's the longest path
  // through them. The ops' sums are taken in `sum_order` (layer_sum_order_ or the graph's
  // topological order).
  void walk_graph(const OpGraph& graph, const std::vector<int>& sum_order, const OpParams* params,
                  const Priced* tabled, const BatchFeatures& x, double repeat,
                  GraphTotals& totals) const;
  // An op with no dependency inside the layer, serialised after it on stream 0. `tabled`: its
  // cached price, else nullptr.
  void add_serial_op(const OpParams& params, const Priced* tabled, const BatchFeatures& x,
                     double repeat, GraphTotals& totals) const;
  // Layers [first, last) of the stack, each seeing the batch `run`, and the windowed ones
  // `windowed_run` (the same batch with their window's keys; nullptr when the model has none).
  // Only the part inside `window` counts, here and below.
  void add_stack_layers(int first, int last, const WorkCounts& run, const WorkCounts* windowed_run,
                        const LayerWindow& window, GraphTotals& totals) const;
  // FLOPs of the masked part of layers [first, last), in the ops the batch `run_x` launches.
  double masked_flops(int first, int last, const BatchFeatures& run_x, const WorkCounts& masked,
                      const WorkCounts* windowed_masked, const LayerWindow& window) const;
  // The stack's layer groups, the general way: one pass over the batch per group of layers.
  void add_stack_by_sweep(std::span<const BatchEntry> batch, const LayerWindow& window,
                          GraphTotals& totals) const;
  // Shortcut: the stack's layer groups from one pass over the batch (roofline_fast.cpp). Adds
  // them to `totals` and sets `coda` (the tokens that run the coda) and `emitting`; false, with
  // nothing added, when the batch has more boundaries than its tables hold or the model has
  // windowed layers (the sweep then prices it).
  bool add_stack_by_boundaries(std::span<const BatchEntry> batch, const LayerWindow& window,
                               GraphTotals& totals, WorkCounts& coda, std::int64_t& emitting) const;
  // The coda layers inside `window` for the tokens `all` that run them, then the head when the
  // window holds it.
  void add_coda_and_head(const WorkCounts& all, std::int64_t emitting, const LayerWindow& window,
                         GraphTotals& totals) const;
  // The confidence probes at the exit points inside `window`.
  void add_probes(std::span<const BatchEntry> batch, const LayerWindow& window,
                  GraphTotals& totals) const;
  // Decode entries probed at exit point `point` (a depth): those running there still deciding.
  static std::int64_t probed_at(std::span<const BatchEntry> batch, int point, int stacked_depth);
  std::size_t variant_of_layer(int layer) const;

  bool counts_only_ = false;  // counting(): FLOPs and bytes only
  TimingScope scope_ = TimingScope::whole_step;
  // What iteration_cost prices without PP: executed layers [first, last) and the head, from the
  // timing scope (block_only: the recursion block's layers, no coda, no head).
  LayerWindow scope_window_;
  bool counts_regroup_exactly_ = false;
  std::vector<LinearCounts> layer_linear_;  // by variant
  LinearCounts head_linear_;

  OpGraph layer_graph_;
  OpGraph head_graph_;
  // layer_params_[variant * layer_graph_.size() + op]; variant 0 has no LoRA, the others one
  // per distinct LoRA rank of the shared block.
  std::vector<OpParams> layer_params_;
  // The layer graph's sum order: its token-only ops (the first layer_token_ops_), then the
  // others, each in topological order.
  std::vector<int> layer_sum_order_;
  std::size_t layer_token_ops_ = 0;
  PriceCache cache_;
  // kv_params_[variant]: state_copy's K/V-only projection, after the layer on stream 0.
  std::vector<OpParams> kv_params_;
  std::vector<OpParams> head_params_;
  OpGraph probe_graph_;
  std::vector<OpParams> probe_params_;
  std::vector<int> probe_points_;  // exit points below the stack's top, ascending; empty: none
  // variant_prefix_[variant * (stacked + 1) + l]: stack layers below l that use the variant.
  std::vector<int> variant_prefix_;
  int variants_ = 1;
  // windowed_[variant]: its layers' attention sees window_ (a model without windowed layers has
  // none: window_ is then empty, and iteration_cost takes its one-pass path).
  std::vector<std::uint8_t> windowed_;
  AttentionWindow window_;
  StackLayout layout_;
  int stacked_depth_ = 0;
  int coda_layers_ = 0;
  double launch_ns_ = 0;
  double ridge_exponent_ = 0;  // KernelCorrections::ridge_exponent
  // Pipeline stages (one, the whole model, without PP) and the hand-off after each but the
  // last: the time per token of activations sent and the send's fixed time.
  std::vector<LayerWindow> stages_;
  std::vector<double> hand_off_ns_per_token_;
  std::vector<double> hand_off_fixed_ns_;
};

// Where `hardware`'s kernel corrections come from and their values, whether a scenario changed
// its preset's, or that it has none (docs/cost_model.md, "Kernel corrections"): one line, which
// `simulate` prints for a roofline run.
std::string kernel_corrections_note(const HardwareSpec& hardware);

// A hardware spec for a roofline kept only for its FLOP and byte counts (the measured cost models
// price time themselves): any positive speeds serve, so those models do not depend on the
// scenario's hardware having a peak for the model's dtype.
// `parallel`: links for its collectives and hand-offs, and one node for all its GPUs.
HardwareSpec counting_hardware(const ModelShape& model, const ParallelSpec& parallel = {});
// A measured model's cost: its time (microseconds) with the counting roofline's FLOPs and bytes.
// A measured model's price of an iteration in microseconds, checked: a price beyond
// k_max_iteration_us (or not finite) is a fit extrapolated far outside its measurements or a
// mistyped entry, and is refused naming `source` (cost_model.profile), never wrapped around.
inline constexpr double k_max_iteration_us = 1e9;  // 1000 s for one step of a batch
IterationCost measured_cost(double microseconds, const IterationCost& counted,
                            const std::string& source);

}  // namespace exitsim::sim
