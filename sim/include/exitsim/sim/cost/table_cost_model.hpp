#pragma once

#include <array>
#include <cstdint>
#include <istream>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "exitsim/core/model_shape.hpp"
#include "exitsim/sim/cost/cost_model.hpp"
#include "exitsim/sim/cost/measured_parallel.hpp"
#include "exitsim/sim/cost/roofline.hpp"

namespace exitsim::sim {

// A user-supplied table of measured per-op times (docs/cost_model.md, "Per-op cost tables"):
// CSV with the version line `# exitsim-cost-table v1` and the header `op,batch,time_us`. The
// batch of a row is the number of tokens the op processes in one call.
struct CostTable {
  struct Point {
    std::int64_t batch = 0;  // tokens processed by one call of the op, >= 1
    double time_us = 0;      // measured time of that call
  };
  // Rows of each op in ascending batch order. layer, lm_head and embedding have at least one.
  std::vector<Point> layer;
  std::vector<Point> lm_head;
  std::vector<Point> embedding;
  std::vector<Point> prefill_layer_per_token;  // per token per layer; empty = use `layer`
  std::optional<double> kv_only_fraction;      // the `kv_only_fraction,0,<f>` row
  // Optional, for tensor and pipeline parallelism (empty: the roofline prices them): one
  // all-reduce of a layer's partial sums, and one hand-off of activations between pipeline
  // stages within a node and between nodes; the batch is the tokens reduced or handed off.
  std::vector<Point> tp_all_reduce;
  std::vector<Point> pp_send_recv;
  std::vector<Point> pp_send_recv_remote;
  std::string source;  // the path (or name) it was read from

  // Strict readers: every problem is an InputError naming the file, line, column and field
  // ("version", "header", "row", "op", "batch", "time_us") with "expected X, found Y".
  static CostTable read(const std::string& path);
  static CostTable parse(std::istream& in, const std::string& name);
};

// Piecewise-linear time of one op at `batch` tokens, in microseconds: linear between the points,
// constant below the first and above the last. `points` must be non-empty and ascending.
double interpolate_us(std::span<const CostTable::Point> points, double batch);

// Prices an iteration from a CostTable: per stack layer the `layer` op at the tokens that run
// it, K/V-only layers at a fraction of that, the coda layers for every token, the LM head if an
// entry emits and the embedding once per iteration. FLOPs, bytes and masked FLOPs are the
// roofline's counts for the same batch (they depend on the model shape only); the table does not
// say what bounds an op, so compute_bound, memory_bound and overhead stay 0.
// Under tensor parallelism the table's rows are one GPU's shard at the scenario's
// parallel.tensor, each layer call adds two all-reduces of its tokens and the LM head the logits
// gather; under pipeline parallelism the layers split into stages and the step is the roofline's
// pipeline schedule. Collectives and hand-offs come from the table's rows where it has them,
// else from the roofline, and notes() says which (docs/cost_model.md, "Measured cost models
// under TP and PP").
class TableCostModel final : public CostModel, private StagePricer {
 public:
  // Throws InputError for an inconsistent model shape (as the roofline does), and for a split
  // the roofline refuses.
  // `scope` block_only: only the `layer` rows of the recursion block's layers (no embedding,
  // prelude or coda layers, LM head), and FLOPs and bytes of those layers (TimingScope).
  TableCostModel(CostTable table, const ModelShape& model, const ParallelPricing& parallel = {},
                 TimingScope scope = TimingScope::whole_step);

  std::string name() const override { return "table"; }
  IterationCost iteration_cost(std::span<const BatchEntry> batch) const override;

  const CostTable& table() const { return table_; }
  // The fraction of a layer call that a K/V-only layer costs: the table's row, or else the share
  // of the layer's weights that its K and V projections hold (decode reads weights once per call,
  // so that is the share of the call's memory traffic).
  double kv_only_fraction() const { return kv_only_fraction_; }
  // Per op, the prices at a batch above the table's largest row (priced flat there); where the
  // roofline priced collectives or hand-offs the table lacks, which ops were measured and which
  // not.
  std::vector<std::string> notes() const override;

 private:
  enum class TableOp : std::uint8_t {
    layer,
    lm_head,
    embedding,
    prefill_layer_per_token,
    tp_all_reduce,
    pp_send_recv,
    pp_send_recv_remote
  };
  static constexpr std::size_t k_table_ops = 7;
  struct TableUse {
    std::int64_t prices = 0;
    std::int64_t beyond_last = 0;
    std::int64_t largest = 0;
  };
  const std::vector<CostTable::Point>& rows(TableOp op) const;
  // interpolate_us over the op's rows, counted for notes().
  double lookup(TableOp op, std::int64_t batch) const;

  // One group of layers seen by `dec` decode tokens and `pre` tokens of longer queries (with TP,
  // its two all-reduces).
  double layer_us(std::int64_t dec, std::int64_t pre) const;
  // `part`'s time on each pipeline stage (one element without PP).
  void stage_us(std::span<const BatchEntry> part, std::span<double> stage_us) const override;
  double hand_off_us(std::size_t boundary, std::int64_t tokens) const override;

  CostTable table_;
  TimingScope scope_ = TimingScope::whole_step;
  RooflineCostModel counts_;  // FLOP and byte counts only; its times are never used
  double kv_only_fraction_ = 0;
  StackLayout layout_;
  int stacked_depth_ = 0;
  int coda_layers_ = 0;
  int first_priced_layer_ = 0;   // 0-based; block_only: the block's first layer
  mutable LayerBatches layers_;  // the batch of each layer, kept so that pricing allocates nothing
  mutable std::array<TableUse, k_table_ops> uses_{};  // by TableOp; the model prices one replica
  MeasuredParallel parallel_;
  // Calls the roofline priced: all-reduces, logits gathers, hand-offs within / between nodes.
  mutable std::array<std::int64_t, k_roofline_stand_ins> roofline_calls_{};
};

}  // namespace exitsim::sim
