#include "exitsim/policy/quality_table.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <ostream>
#include <span>
#include <stdexcept>

#include "exit/exit_policies.hpp"
#include "exit/table_reader.hpp"
#include "exitsim/core/error.hpp"
#include "exitsim/policy/exit_policy.hpp"
#include "exitsim/policy/sync_strategy.hpp"

namespace exitsim::policy {
namespace {

using exit::number_text;

// Column indices, in k_quality_table_columns order; the exit probabilities follow.
constexpr std::size_t k_policy = 0;
constexpr std::size_t k_strategy = 1;
constexpr std::size_t k_measure = 2;
constexpr std::size_t k_threshold = 3;
constexpr std::size_t k_capacities = 4;
constexpr std::size_t k_tokens = 5;
constexpr std::size_t k_nll = 6;
constexpr std::size_t k_agreement = 7;
constexpr std::size_t k_depth = 8;
constexpr std::size_t k_first_exit = 9;
constexpr std::size_t k_whole_row = static_cast<std::size_t>(-1);

// What each column holds, worded once for the syntax errors and the range errors alike.
constexpr const char* k_threshold_expected = "a finite number";
constexpr const char* k_capacities_expected = "capacities in (0, 1] separated by \";\"";
constexpr const char* k_tokens_expected = "a token count of at least 1";
constexpr const char* k_nll_expected = "a non-negative number of nats";
constexpr const char* k_agreement_expected = "a fraction in [0, 1]";
constexpr const char* k_depth_expected = "a non-negative number of layers";
constexpr const char* k_probability_expected = "a probability in [0, 1]";

std::string field_name(std::size_t column) {
  if (column == k_whole_row)
    return "row";
  if (column < k_first_exit)
    return std::string(k_quality_table_columns[column]);
  return exit::probability_column(column - k_first_exit);
}

std::string capacities_text(const std::vector<double>& capacities) {
  std::string out;
  for (std::size_t r = 0; r < capacities.size(); ++r)
    out += (r == 0 ? "" : ";") + number_text(capacities[r]);
  return out;
}

// A rule a row breaks: the column at fault (k_whole_row for the row as a whole) and the message.
struct RowProblem {
  std::size_t column = k_whole_row;
  std::string message;
};

RowProblem problem(std::size_t column, const std::string& expected, const std::string& found) {
  return RowProblem{column, expected_found(expected, found)};
}

std::optional<RowProblem> check_policy(const QualityRow& row) {
  std::vector<std::string> names = exit_policy_names();
  std::string listed;
  for (const std::string& name : names)
    listed += ", " + name;
  if (row.policy != k_full_depth_policy &&
      std::find(names.begin(), names.end(), row.policy) == names.end()) {
    return problem(k_policy, "full_depth or an exit policy (" + listed.substr(2) + ")",
                   quote_field(row.policy));
  }
  const bool reference = row.policy == k_full_depth_policy;
  if (reference && row.strategy != "full_depth") {
    return problem(k_strategy, "full_depth (the full_depth row's strategy)",
                   quote_field(row.strategy));
  }
  if (!reference && (!parse_sync_strategy(row.strategy) || row.strategy == "full_depth")) {
    return problem(k_strategy,
                   "a synchronization strategy that lets tokens exit (batch_sync, state_copy, "
                   "deferred_fill, skip_kv, shared_kv, depthwise)",
                   quote_field(row.strategy));
  }
  // adaptive_threshold's rows are keyed like confidence's: the measure and the threshold it
  // starts from (exit_policy.threshold).
  const bool confidence = row.policy == "confidence" || row.policy == "adaptive_threshold";
  if (confidence && !parse_confidence_measure(row.measure)) {
    return problem(k_measure, "\"top1\" or \"margin\" (a confidence row's measure)",
                   quote_field(row.measure));
  }
  if (!confidence && !row.measure.empty()) {
    return problem(k_measure,
                   "an empty field (only confidence and adaptive_threshold rows have a measure)",
                   quote_field(row.measure));
  }
  if (confidence && !row.threshold)
    return problem(k_threshold, "a confidence threshold", "an empty field");
  if (row.threshold && !std::isfinite(*row.threshold))
    return problem(k_threshold, k_threshold_expected, number_text(*row.threshold));
  if (row.threshold && !row.capacities.empty()) {
    return problem(k_capacities, "an empty field (a row has a threshold or capacities, not both)",
                   quote_field(capacities_text(row.capacities)));
  }
  for (const double capacity : row.capacities) {
    if (!(capacity > 0.0 && capacity <= 1.0)) {
      return problem(k_capacities, k_capacities_expected,
                     quote_field(capacities_text(row.capacities)));
    }
  }
  return std::nullopt;
}

std::optional<RowProblem> check_measurements(const QualityRow& row, std::size_t exit_points) {
  if (row.tokens < 1)
    return problem(k_tokens, k_tokens_expected, std::to_string(row.tokens));
  if (!(std::isfinite(row.nll_per_token) && row.nll_per_token >= 0.0))
    return problem(k_nll, k_nll_expected, number_text(row.nll_per_token));
  if (!(row.top1_agreement >= 0.0 && row.top1_agreement <= 1.0))
    return problem(k_agreement, k_agreement_expected, number_text(row.top1_agreement));
  if (!(std::isfinite(row.mean_exit_depth) && row.mean_exit_depth >= 0.0))
    return problem(k_depth, k_depth_expected, number_text(row.mean_exit_depth));
  if (row.p_exit.size() != exit_points) {
    return problem(k_whole_row, std::to_string(exit_points) + " exit probabilities",
                   std::to_string(row.p_exit.size()));
  }
  double sum = 0.0;
  for (std::size_t k = 0; k < exit_points; ++k) {
    const double p = row.p_exit[k];
    if (!(p >= 0.0 && p <= 1.0))
      return problem(k_first_exit + k, k_probability_expected, number_text(p));
    sum += p;
  }
  if (std::abs(sum - 1.0) > exit::k_sum_tolerance)
    return problem(k_whole_row, "probabilities summing to 1", "a sum of " + number_text(sum));
  return std::nullopt;
}

// Each setting once, and a policy and measure's thresholds ascending, so that a reader can look
// a setting up or interpolate between thresholds without sorting or choosing among duplicates.
std::optional<RowProblem> check_order(const QualityRow& row, std::span<const QualityRow> before) {
  const std::string kind = row.policy + (row.measure.empty() ? "" : " " + row.measure);
  const std::string under = row.policy == k_full_depth_policy ? "" : " under " + row.strategy;
  for (auto other = before.rbegin(); other != before.rend(); ++other) {
    if (other->policy != row.policy || other->strategy != row.strategy ||
        other->measure != row.measure ||
        other->threshold.has_value() != row.threshold.has_value()) {
      continue;
    }
    if (row.threshold) {
      // The latest such row holds the largest threshold so far.
      if (*other->threshold < *row.threshold)
        return std::nullopt;
      return problem(k_threshold,
                     "a threshold above " + number_text(*other->threshold) + " (the previous " +
                         kind + " row's" + under + ")",
                     number_text(*row.threshold));
    }
    if (other->capacities == row.capacities) {
      const std::string with =
          row.capacities.empty() ? "" : " with capacities " + capacities_text(row.capacities);
      return problem(k_whole_row, "one row per setting",
                     "a second " + kind + " row" + under + with);
    }
  }
  return std::nullopt;
}

std::optional<RowProblem> check_row(const QualityRow& row, std::span<const QualityRow> before,
                                    std::size_t exit_points) {
  if (auto found = check_policy(row))
    return found;
  if (auto found = check_measurements(row, exit_points))
    return found;
  return check_order(row, before);
}

std::vector<double> parse_capacities(const exit::TableReader& reader, const CsvField& cell) {
  std::vector<double> out;
  if (cell.text.empty())
    return out;
  std::size_t start = 0;
  for (;;) {
    const std::size_t stop = std::min(cell.text.find(';', start), cell.text.size());
    const std::string_view piece = cell.text.substr(start, stop - start);
    double value = 0.0;
    const auto [ptr, ec] = std::from_chars(piece.data(), piece.data() + piece.size(), value);
    if (piece.empty() || ec != std::errc{} || ptr != piece.data() + piece.size() ||
        !std::isfinite(value)) {
      reader.fail(cell.column, "capacities",
                  expected_found(k_capacities_expected, quote_field(cell.text)));
    }
    out.push_back(value);
    if (stop == cell.text.size())
      return out;
    start = stop + 1;
  }
}

}  // namespace

namespace exit {

ParsedQualityTable parse_quality_table(TableReader& reader) {
  const std::size_t exit_points = read_header(reader, k_quality_table_columns);
  std::vector<QualityRow> rows;
  std::vector<std::int64_t> lines;
  while (reader.next_line()) {
    const std::vector<CsvField>& cells = reader.split_row(k_first_exit + exit_points);
    QualityRow row;
    row.policy = cells[k_policy].text;
    row.strategy = cells[k_strategy].text;
    row.measure = cells[k_measure].text;
    if (!cells[k_threshold].text.empty())
      row.threshold = parse_number(reader, cells[k_threshold], "threshold", k_threshold_expected);
    row.capacities = parse_capacities(reader, cells[k_capacities]);
    row.tokens = parse_count(reader, cells[k_tokens], "tokens", k_tokens_expected);
    row.nll_per_token = parse_number(reader, cells[k_nll], "nll_per_token", k_nll_expected);
    row.top1_agreement =
        parse_number(reader, cells[k_agreement], "top1_agreement", k_agreement_expected);
    row.mean_exit_depth = parse_number(reader, cells[k_depth], "mean_exit_depth", k_depth_expected);
    for (std::size_t k = 0; k < exit_points; ++k) {
      row.p_exit.push_back(parse_number(reader, cells[k_first_exit + k], probability_column(k),
                                        k_probability_expected));
    }
    if (const auto found = check_row(row, rows, exit_points)) {
      reader.fail(found->column == k_whole_row ? 0 : cells[found->column].column,
                  field_name(found->column), found->message);
    }
    rows.push_back(std::move(row));
    lines.push_back(reader.line_number());
  }
  if (rows.empty())
    reader.fail_at_end("row", "expected at least one setting row, found end of file");
  return {QualityTable(std::move(rows), reader.name()), std::move(lines)};
}

}  // namespace exit

QualityTable::QualityTable(std::vector<QualityRow> rows, std::string source)
    : rows_(std::move(rows)), source_(std::move(source)) {
  if (rows_.empty() || rows_.front().p_exit.empty()) {
    throw std::invalid_argument("quality table " + source_ +
                                ": expected rows with at least one exit probability");
  }
  for (std::size_t i = 0; i < rows_.size(); ++i) {
    if (const auto found = check_row(rows_[i], std::span(rows_).first(i), exit_points())) {
      throw std::invalid_argument("quality table " + source_ + ": row " + std::to_string(i + 1) +
                                  ": " + field_name(found->column) + ": " + found->message);
    }
  }
}

QualityTable QualityTable::read(const std::string& path) {
  std::ifstream in(path);
  if (!in)
    throw InputError(SourceLocation{path, 0, 0, ""}, "cannot open the quality table for reading");
  return parse(in, path);
}

QualityTable QualityTable::parse(std::istream& in, const std::string& name) {
  exit::TableReader reader(in, name);
  reader.next_line();
  reader.check_version(k_quality_table_version_line);
  return exit::parse_quality_table(reader).table;
}

void QualityTable::write(std::ostream& out) const {
  out << k_quality_table_version_line << '\n';
  for (const std::string_view column : k_quality_table_columns)
    out << column << ',';
  for (std::size_t k = 0; k < exit_points(); ++k)
    out << (k == 0 ? "" : ",") << exit::probability_column(k);
  out << '\n';
  for (const QualityRow& row : rows_) {
    out << row.policy << ',' << row.strategy << ',' << row.measure << ','
        << (row.threshold ? number_text(*row.threshold) : "") << ','
        << capacities_text(row.capacities) << ',' << row.tokens << ','
        << number_text(row.nll_per_token) << ',' << number_text(row.top1_agreement) << ','
        << number_text(row.mean_exit_depth);
    for (const double p : row.p_exit)
      out << ',' << number_text(p);
    out << '\n';
  }
}

QualitySetting QualitySetting::of(const QualityRow& row) {
  return canonical({row.policy, row.strategy, row.measure, row.threshold, row.capacities});
}

QualitySetting full_depth_setting() {
  return {std::string(k_full_depth_policy), "full_depth", "", std::nullopt, {}};
}

QualitySetting canonical(QualitySetting setting) {
  if (setting.strategy == "full_depth" || setting.policy == "none" ||
      setting.policy == k_full_depth_policy) {
    return full_depth_setting();
  }
  return setting;
}

const QualityRow* find_quality_row(const QualityTable& table, const QualitySetting& setting) {
  const QualitySetting wanted = canonical(setting);
  for (const QualityRow& row : table.rows()) {
    const QualitySetting have = QualitySetting::of(row);
    if (have.policy != wanted.policy || have.strategy != wanted.strategy ||
        ((wanted.policy == "confidence" || wanted.policy == "adaptive_threshold") &&
         have.measure != wanted.measure)) {
      continue;
    }
    const bool same_threshold =
        have.threshold.has_value() == wanted.threshold.has_value() &&
        (!have.threshold || std::abs(*have.threshold - *wanted.threshold) <= 1e-9);
    if (same_threshold && have.capacities == wanted.capacities)
      return &row;
  }
  return nullptr;
}

}  // namespace exitsim::policy
