#include "exitsim/policy/exit_table.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <istream>
#include <ostream>
#include <stdexcept>

#include "exit/exit_policies.hpp"
#include "exit/table_reader.hpp"
#include "exitsim/core/csv_fields.hpp"
#include "exitsim/core/error.hpp"

namespace exitsim::policy {
namespace {

using exit::k_sum_tolerance;
using exit::number_text;
using exit::TableReader;

// The quality table's family: a version line of this prefix is judged against its version, so
// a quality table of another version is not told to be an exit table.
constexpr std::string_view k_quality_table_family = "# exitsim-quality-table";

}  // namespace

ExitTable::ExitTable(std::vector<double> thresholds, std::vector<std::vector<double>> distributions,
                     std::string source)
    : thresholds_(std::move(thresholds)), source_(std::move(source)) {
  if (thresholds_.empty() || distributions.size() != thresholds_.size() ||
      distributions[0].empty()) {
    throw std::invalid_argument("exit table: expected one non-empty distribution per threshold");
  }
  exit_points_ = distributions[0].size();
  for (std::size_t row = 0; row < thresholds_.size(); ++row) {
    const std::vector<double>& p = distributions[row];
    double sum = 0.0;
    for (const double x : p) {
      if (!(x >= 0.0 && x <= 1.0))
        throw std::invalid_argument("exit table: probability " + number_text(x));
      sum += x;
    }
    if (p.size() != exit_points_ || std::abs(sum - 1.0) > k_sum_tolerance ||
        !std::isfinite(thresholds_[row]) || (row > 0 && thresholds_[row] <= thresholds_[row - 1])) {
      throw std::invalid_argument("exit table: malformed row " + std::to_string(row));
    }
    probabilities_.insert(probabilities_.end(), p.begin(), p.end());
  }
}

ExitTable ExitTable::read(const std::string& path, std::string_view strategy) {
  std::ifstream in(path);
  if (!in)
    throw InputError(SourceLocation{path, 0, 0, ""}, "cannot open the exit table for reading");
  return parse(in, path, strategy);
}

ExitTable ExitTable::parse(std::istream& in, const std::string& name, std::string_view strategy) {
  TableReader reader(in, name);
  if (reader.next_line() && reader.line().starts_with(k_quality_table_family)) {
    reader.check_version(k_quality_table_version_line);
    const exit::ParsedQualityTable parsed = exit::parse_quality_table(reader);
    return from_quality_rows(parsed.table, parsed.lines, strategy);
  }
  reader.check_version(k_exit_table_version_line);
  constexpr std::string_view k_fixed[] = {"threshold"};
  ExitTable table;
  table.source_ = name;
  table.exit_points_ = exit::read_header(reader, k_fixed);
  while (reader.next_line()) {
    const std::vector<CsvField>& cells = reader.split_row(table.exit_points_ + 1);
    const double threshold = exit::parse_number(reader, cells[0], "threshold", "a finite number");
    if (!table.thresholds_.empty() && threshold <= table.thresholds_.back()) {
      reader.fail(cells[0].column, "threshold",
                  expected_found("a threshold above " + number_text(table.thresholds_.back()) +
                                     " (the previous row's)",
                                 number_text(threshold)));
    }
    exit::parse_exit_distribution(reader, std::span(cells).subspan(1), table.probabilities_);
    table.thresholds_.push_back(threshold);
  }
  if (table.thresholds_.empty())
    reader.fail_at_end("row", "expected at least one threshold row, found end of file");
  return table;
}

ExitTable ExitTable::from_quality_table(const QualityTable& table, std::string_view strategy) {
  return from_quality_rows(table, {}, strategy);
}

ExitTable ExitTable::from_quality_rows(const QualityTable& table,
                                       std::span<const std::int64_t> lines,
                                       std::string_view strategy) {
  std::vector<double> thresholds;
  std::vector<std::vector<double>> distributions;
  std::string measure;
  std::int64_t measure_line = 0;
  for (std::size_t i = 0; i < table.rows().size(); ++i) {
    const QualityRow& row = table.rows()[i];
    if (row.policy != "confidence" || row.strategy != strategy)
      continue;
    const std::int64_t line = i < lines.size() ? lines[i] : 0;
    if (thresholds.empty()) {
      measure = row.measure;
      measure_line = line;
    } else if (row.measure != measure) {
      const std::string first =
          measure_line > 0 ? "line " + std::to_string(measure_line) : "the first confidence row";
      throw InputError(
          SourceLocation{table.source(), line, 0, "measure"},
          expected_found("\"" + measure + "\" as on " + first +
                             " (a threshold means something else under each measure: keep one "
                             "measure per table)",
                         "\"" + row.measure + "\""));
    }
    // The quality table keeps each policy and measure's thresholds ascending.
    thresholds.push_back(*row.threshold);
    distributions.push_back(row.p_exit);
  }
  if (thresholds.empty()) {
    throw InputError(
        SourceLocation{table.source(), 0, 0, "policy"},
        expected_found(fmt::format("at least one confidence row measured under {} (its exit "
                                   "distributions per threshold; `exitsim engine eval "
                                   "--strategies {}` measures them)",
                                   strategy, strategy),
                       "none"));
  }
  ExitTable out(std::move(thresholds), std::move(distributions), table.source());
  out.measure_ = measure;
  return out;
}

void ExitTable::write(std::ostream& out) const {
  out << k_exit_table_version_line << "\nthreshold";
  for (std::size_t k = 0; k < exit_points_; ++k)
    out << ',' << exit::probability_column(k);
  out << '\n';
  for (std::size_t row = 0; row < rows(); ++row) {
    out << number_text(thresholds_[row]);
    for (const double p : distribution(row))
      out << ',' << number_text(p);
    out << '\n';
  }
}

std::span<const double> ExitTable::distribution(std::size_t row) const {
  return std::span<const double>(probabilities_).subspan(row * exit_points_, exit_points_);
}

std::vector<double> ExitTable::exit_distribution_for(double threshold) const {
  if (!(threshold >= thresholds_.front() && threshold <= thresholds_.back())) {
    throw_setting_error("exit_policy.threshold",
                        "a threshold in [" + number_text(thresholds_.front()) + ", " +
                            number_text(thresholds_.back()) + "] (the range of exit table " +
                            source_ + ")",
                        number_text(threshold));
  }
  // The first row at or above the threshold; an exact match is returned as written.
  const auto above = std::lower_bound(thresholds_.begin(), thresholds_.end(), threshold);
  const auto row = static_cast<std::size_t>(above - thresholds_.begin());
  const std::span<const double> hi = distribution(row);
  if (*above == threshold)
    return {hi.begin(), hi.end()};
  const std::span<const double> lo = distribution(row - 1);
  const double w = (threshold - thresholds_[row - 1]) / (thresholds_[row] - thresholds_[row - 1]);
  std::vector<double> out(exit_points_);
  for (std::size_t k = 0; k < exit_points_; ++k)
    out[k] = (1.0 - w) * lo[k] + w * hi[k];
  return out;
}

}  // namespace exitsim::policy
