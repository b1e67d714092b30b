#include "exitsim/sim/cost/table_cost_model.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <fstream>
#include <string_view>
#include <utility>

#include "exitsim/core/csv_fields.hpp"
#include "exitsim/core/csv_lines.hpp"
#include "exitsim/core/error.hpp"
#include "exitsim/core/hardware.hpp"

namespace exitsim::sim {
namespace {

constexpr std::string_view k_version_line = "# exitsim-cost-table v1";
constexpr std::array<std::string_view, 3> k_columns = {"op", "batch", "time_us"};
constexpr std::string_view k_ops =
    "one of layer, lm_head, embedding, prefill_layer_per_token, kv_only_fraction, tp_all_reduce, "
    "pp_send_recv, pp_send_recv.remote";

using Cell = CsvField;

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

std::vector<Cell> split_cells(std::string_view line) {
  std::vector<Cell> out;
  split_csv_fields(line, out);
  return out;
}

using Reader = CsvLineReader;

std::int64_t parse_batch(const Reader& reader, const Cell& cell, const std::string& expected) {
  std::int64_t value = 0;
  const char* end = cell.text.data() + cell.text.size();
  const auto [ptr, ec] = std::from_chars(cell.text.data(), end, value);
  if (cell.text.empty() || ec != std::errc{} || ptr != end)
    reader.fail(cell.column, "batch", expected_found(expected, quote_field(cell.text)));
  return value;
}

double parse_number(const Reader& reader, const Cell& cell, const std::string& expected) {
  double value = 0.0;
  const char* end = cell.text.data() + cell.text.size();
  const auto [ptr, ec] = std::from_chars(cell.text.data(), end, value);
  if (cell.text.empty() || ec != std::errc{} || ptr != end || !std::isfinite(value))
    reader.fail(cell.column, "time_us", expected_found(expected, quote_field(cell.text)));
  return value;
}

void read_version(Reader& reader) {
  if (!reader.next_line())
    reader.fail_at_end("version",
                       expected_found("\"" + std::string(k_version_line) + "\"", "end of file"));
  const std::string_view got = trim(reader.line());
  if (got != k_version_line) {
    reader.fail(1, "version",
                expected_found("\"" + std::string(k_version_line) + "\"", quote_field(got)));
  }
}

void read_header(Reader& reader) {
  if (!reader.next_content_line()) {
    reader.fail_at_end("header", expected_found("the header \"op,batch,time_us\"", "end of file"));
  }
  const std::vector<Cell> cells = split_cells(reader.line());
  for (std::size_t k = 0; k < k_columns.size(); ++k) {
    if (k >= cells.size()) {
      reader.fail(static_cast<std::int64_t>(reader.line().size()) + 1, "header",
                  expected_found("column \"" + std::string(k_columns[k]) + "\"", "end of line"));
    }
    if (cells[k].text != k_columns[k]) {
      reader.fail(cells[k].column, "header",
                  expected_found("column \"" + std::string(k_columns[k]) + "\"",
                                 quote_field(cells[k].text)));
    }
  }
  if (cells.size() > k_columns.size()) {
    reader.fail(cells[k_columns.size()].column, "header",
                expected_found("3 columns (op,batch,time_us)", std::to_string(cells.size())));
  }
}

}  // namespace

CostTable CostTable::read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw InputError({path, 0, 0, "cost_model.profile"},
                     expected_found("a readable cost table", "a path that cannot be opened"));
  }
  return parse(in, path);
}

CostTable CostTable::parse(std::istream& in, const std::string& name) {
  Reader reader(in, name);
  read_version(reader);
  read_header(reader);

  CostTable table;
  table.source = name;
  std::int64_t kv_only_line = 0;
  while (reader.next_content_line()) {
    const std::vector<Cell> cells = split_cells(reader.line());
    if (cells.size() != k_columns.size()) {
      const std::int64_t column = cells.size() > k_columns.size()
                                      ? cells[k_columns.size()].column
                                      : static_cast<std::int64_t>(reader.line().size()) + 1;
      reader.fail(column, "row",
                  expected_found("3 fields (op,batch,time_us)", std::to_string(cells.size())));
    }
    const Cell& op = cells[0];
    if (op.text == "kv_only_fraction") {
      if (kv_only_line > 0) {
        reader.fail(op.column, "op",
                    expected_found(fmt::format("one kv_only_fraction row (the first is on line {})",
                                               kv_only_line),
                                   "a second"));
      }
      const std::int64_t batch = parse_batch(reader, cells[1], "batch 0 for kv_only_fraction");
      if (batch != 0) {
        reader.fail(cells[1].column, "batch",
                    expected_found("batch 0 for kv_only_fraction", quote_field(cells[1].text)));
      }
      const double fraction = parse_number(reader, cells[2], "a fraction in [0, 1]");
      if (!(fraction >= 0.0 && fraction <= 1.0))
        reader.fail(cells[2].column, "time_us",
                    expected_found("a fraction in [0, 1]", quote_field(cells[2].text)));
      table.kv_only_fraction = fraction;
      kv_only_line = reader.line_number();
      continue;
    }
    std::vector<Point>* points = nullptr;
    if (op.text == "layer")
      points = &table.layer;
    else if (op.text == "lm_head")
      points = &table.lm_head;
    else if (op.text == "embedding")
      points = &table.embedding;
    else if (op.text == "prefill_layer_per_token")
      points = &table.prefill_layer_per_token;
    else if (op.text == "tp_all_reduce")
      points = &table.tp_all_reduce;
    else if (op.text == "pp_send_recv")
      points = &table.pp_send_recv;
    else if (op.text == "pp_send_recv.remote")
      points = &table.pp_send_recv_remote;
    else
      reader.fail(op.column, "op", expected_found(std::string(k_ops), quote_field(op.text)));

    const std::string batch_expected = "a whole number of tokens >= 1";
    const std::int64_t batch = parse_batch(reader, cells[1], batch_expected);
    if (batch < 1)
      reader.fail(cells[1].column, "batch",
                  expected_found(batch_expected, quote_field(cells[1].text)));
    if (!points->empty() && batch <= points->back().batch) {
      reader.fail(cells[1].column, "batch",
                  expected_found(fmt::format("a batch above {} (the rows of an op ascend by batch)",
                                             points->back().batch),
                                 quote_field(cells[1].text)));
    }
    const std::string time_expected = "a time in microseconds >= 0";
    const double time_us = parse_number(reader, cells[2], time_expected);
    if (time_us < 0)
      reader.fail(cells[2].column, "time_us",
                  expected_found(time_expected, quote_field(cells[2].text)));
    points->push_back({batch, time_us});
  }

  for (const auto& [op, points] :
       {std::pair{"layer", &table.layer}, std::pair{"lm_head", &table.lm_head},
        std::pair{"embedding", &table.embedding}}) {
    if (points->empty()) {
      reader.fail_at_end("op", expected_found(fmt::format("at least one \"{}\" row", op), "none"));
    }
  }
  return table;
}

double interpolate_us(std::span<const CostTable::Point> points, double batch) {
  if (batch <= static_cast<double>(points.front().batch))
    return points.front().time_us;
  if (batch >= static_cast<double>(points.back().batch))
    return points.back().time_us;
  const auto upper =
      std::upper_bound(points.begin(), points.end(), batch,
                       [](double b, const auto& p) { return b < static_cast<double>(p.batch); });
  const CostTable::Point& hi = *upper;
  const CostTable::Point& lo = *(upper - 1);
  const double t =
      (batch - static_cast<double>(lo.batch)) / static_cast<double>(hi.batch - lo.batch);
  return lo.time_us + t * (hi.time_us - lo.time_us);
}

namespace {

double kv_weight_share(const ModelShape& model) {
  const double kv = 2.0 * static_cast<double>(model.d_model * model.n_kv_heads * model.head_dim);
  const double layer = static_cast<double>(model.layer_parameters());
  return layer > 0 ? kv / layer : 0.0;
}

}  // namespace

TableCostModel::TableCostModel(CostTable table, const ModelShape& model,
                               const ParallelPricing& parallel, TimingScope scope)
    : table_(std::move(table)),
      scope_(scope),
      counts_(RooflineCostModel::counting(model, parallel.parallel, scope)),
      kv_only_fraction_(table_.kv_only_fraction.value_or(kv_weight_share(model))),
      layout_(model.depth),
      stacked_depth_(model.depth.stacked_depth()),
      coda_layers_(model.depth.coda_layers),
      first_priced_layer_(scope == TimingScope::block_only ? block_only_first_layer(model.depth)
                                                           : 0),
      parallel_(model, parallel) {}

const std::vector<CostTable::Point>& TableCostModel::rows(TableOp op) const {
  switch (op) {
    case TableOp::layer:
      return table_.layer;
    case TableOp::lm_head:
      return table_.lm_head;
    case TableOp::embedding:
      return table_.embedding;
    case TableOp::prefill_layer_per_token:
      return table_.prefill_layer_per_token;
    case TableOp::tp_all_reduce:
      return table_.tp_all_reduce;
    case TableOp::pp_send_recv:
      return table_.pp_send_recv;
    case TableOp::pp_send_recv_remote:
      break;
  }
  return table_.pp_send_recv_remote;
}

double TableCostModel::lookup(TableOp op, std::int64_t batch) const {
  const std::vector<CostTable::Point>& points = rows(op);
  TableUse& use = uses_[static_cast<std::size_t>(op)];
  ++use.prices;
  if (batch > points.back().batch) {
    ++use.beyond_last;
    use.largest = std::max(use.largest, batch);
  }
  return interpolate_us(points, static_cast<double>(batch));
}

std::vector<std::string> TableCostModel::notes() const {
  static constexpr std::array<const char*, k_table_ops> k_names = {
      "layer",         "lm_head",      "embedding",          "prefill_layer_per_token",
      "tp_all_reduce", "pp_send_recv", "pp_send_recv.remote"};
  std::vector<std::string> out;
  if (scope_ == TimingScope::block_only)
    out.push_back(timing_scope_note(scope_, "cost table"));
  std::string measured;
  const auto append = [](std::string& list, const std::string& item) {
    list += (list.empty() ? "" : ", ") + item;
  };
  for (std::size_t i = 0; i < uses_.size(); ++i) {
    const TableUse& use = uses_[i];
    if (use.prices > 0)
      append(measured, k_names[i]);
    if (use.beyond_last == 0)
      continue;
    out.push_back(fmt::format(
        "cost_model.table: {}: {} of {} prices at a batch above the table's largest ({}; up to "
        "{}): priced at the largest row's time, not measured",
        k_names[i], use.beyond_last, use.prices, rows(static_cast<TableOp>(i)).back().batch,
        use.largest));
  }
  const std::string roofline = roofline_stand_ins_used(roofline_calls_);
  if (!roofline.empty()) {
    out.push_back(fmt::format(
        "cost_model.table: measured (the table's rows): {}; not in the table, priced by the "
        "roofline: {}",
        measured.empty() ? "none" : measured, roofline));
  }
  return out;
}

double TableCostModel::layer_us(std::int64_t dec, std::int64_t pre) const {
  double us = 0;
  if (table_.prefill_layer_per_token.empty()) {
    const std::int64_t tokens = dec + pre;
    us = tokens > 0 ? lookup(TableOp::layer, tokens) : 0.0;
  } else {
    us = dec > 0 ? lookup(TableOp::layer, dec) : 0.0;
    if (pre > 0)
      us += static_cast<double>(pre) * lookup(TableOp::prefill_layer_per_token, pre);
  }
  // Under TP the layer's one call leaves partial sums twice (output and down projections).
  if (parallel_.tensor() > 1 && dec + pre > 0) {
    double reduce = 0;
    if (!table_.tp_all_reduce.empty()) {
      reduce = lookup(TableOp::tp_all_reduce, dec + pre);
    } else {
      ++roofline_calls_[0];
      reduce = parallel_.all_reduce_us(dec + pre);
    }
    us += 2 * reduce;
  }
  return us;
}

double TableCostModel::hand_off_us(std::size_t boundary, std::int64_t tokens) const {
  const bool remote = parallel_.remote(boundary);
  const TableOp op = remote ? TableOp::pp_send_recv_remote : TableOp::pp_send_recv;
  if (!rows(op).empty())
    return lookup(op, tokens);
  ++roofline_calls_[remote ? 3 : 2];
  return parallel_.hand_off_us(boundary, tokens);
}

IterationCost TableCostModel::iteration_cost(std::span<const BatchEntry> batch) const {
  double us = 0;
  if (parallel_.stages() > 1)
    us = parallel_.step_us(batch, *this);
  else
    stage_us(batch, std::span<double>(&us, 1));
  return measured_cost(us, counts_.iteration_cost(batch), table_.source);
}

void TableCostModel::stage_us(std::span<const BatchEntry> batch, std::span<double> stage_us) const {
  // Per layer, the table reads the tokens of single-token queries (decode_seqs), the tokens of
  // longer queries (prefill chunks, deferred fills: prefill_tokens) and K/V-only tokens.
  layers_.clear(stacked_depth_);
  for (const BatchEntry& e : batch) {
    if (e.query_tokens > 0)
      layers_.add(layout_, e);
  }
  const WorkCounts& coda = layers_.coda;
  const std::int64_t embedded = layers_.embedded;
  const std::int64_t emitting = layers_.emitting;

  // Without PP everything is summed into one element, in the order it always was.
  const bool staged = stage_us.size() > 1;
  std::fill(stage_us.begin(), stage_us.end(), 0.0);
  WorkCounts run{};
  WorkCounts priced{};
  double priced_us = 0;
  for (std::size_t l = 0; l < static_cast<std::size_t>(stacked_depth_); ++l) {
    layers_.next_layer(run);
    if (static_cast<int>(l) < first_priced_layer_)
      continue;  // block_only: the prelude is outside the timing
    // Consecutive layers usually see the same batch: price each distinct one once.
    if (static_cast<int>(l) == first_priced_layer_ || run.decode_seqs != priced.decode_seqs ||
        run.prefill_tokens != priced.prefill_tokens ||
        run.kv_only_tokens != priced.kv_only_tokens) {
      priced = run;
      priced_us = layer_us(run.decode_seqs, run.prefill_tokens);
      if (run.kv_only_tokens > 0)
        priced_us += kv_only_fraction_ * lookup(TableOp::layer, run.kv_only_tokens);
    }
    stage_us[staged ? parallel_.stage_of(static_cast<int>(l)) : 0] += priced_us;
  }
  if (scope_ == TimingScope::block_only)
    return;  // no coda, LM head or embedding in a block-only timing (and no PP: refused)
  const double coda_us = layer_us(coda.decode_seqs, coda.prefill_tokens);
  if (staged) {
    for (int j = 0; j < coda_layers_; ++j)
      stage_us[parallel_.stage_of(stacked_depth_ + j)] += coda_us;
  } else {
    stage_us.front() += static_cast<double>(coda_layers_) * coda_us;
  }
  // The LM head (and under TP its logits gather) on the last stage, the embedding on the first.
  if (emitting > 0) {
    stage_us.back() += lookup(TableOp::lm_head, emitting);
    if (parallel_.tensor() > 1) {
      ++roofline_calls_[1];
      stage_us.back() += parallel_.logits_gather_us(emitting);
    }
  }
  if (embedded > 0)
    stage_us.front() += lookup(TableOp::embedding, embedded);
}

}  // namespace exitsim::sim
