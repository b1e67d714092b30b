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
  std::string source;                          // the path (or name) it was read from

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
class TableCostModel final : public CostModel {
 public:
  // Throws InputError for an inconsistent model shape (as the roofline does).
  TableCostModel(CostTable table, const ModelShape& model);

  std::string name() const override { return "table"; }
  IterationCost iteration_cost(std::span<const BatchEntry> batch) const override;

  const CostTable& table() const { return table_; }
  // The fraction of a layer call that a K/V-only layer costs: the table's row, or else the share
  // of the layer's weights that its K and V projections hold (decode reads weights once per call,
  // so that is the share of the call's memory traffic).
  double kv_only_fraction() const { return kv_only_fraction_; }
  // Per op, the prices at a batch above the table's largest row (priced flat there).
  std::vector<std::string> notes() const override;

 private:
  enum class TableOp : std::uint8_t { layer, lm_head, embedding, prefill_layer_per_token };
  struct TableUse {
    std::int64_t prices = 0;
    std::int64_t beyond_last = 0;
    std::int64_t largest = 0;
  };
  const std::vector<CostTable::Point>& rows(TableOp op) const;
  // interpolate_us over the op's rows, counted for notes().
  double lookup(TableOp op, std::int64_t batch) const;

  // One group of layers seen by `dec` decode tokens and `pre` tokens of longer queries.
  double layer_us(std::int64_t dec, std::int64_t pre) const;

  CostTable table_;
  RooflineCostModel counts_;  // FLOP and byte counts only; its times are never used
  double kv_only_fraction_ = 0;
  int stacked_depth_ = 0;
  int coda_layers_ = 0;
  mutable std::array<TableUse, 4> uses_{};  // by TableOp; the model prices one replica
};

}  // namespace exitsim::sim
