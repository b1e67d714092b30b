#include "exitsim/policy/exit_table.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <istream>
#include <ostream>
#include <stdexcept>

#include "exit/exit_policies.hpp"
#include "exitsim/core/csv_fields.hpp"
#include "exitsim/core/error.hpp"

namespace exitsim::policy {
namespace {

using exit::number_text;

constexpr double k_sum_tolerance = 1e-6;

using Cell = CsvField;

std::string probability_column(std::size_t k) {
  return "p_exit_" + std::to_string(k + 1);
}

class TableReader {
 public:
  TableReader(std::istream& in, std::string name) : in_(in), name_(std::move(name)) {}

  [[noreturn]] void fail(std::int64_t column, const std::string& field,
                         const std::string& message) const {
    throw InputError(SourceLocation{name_, line_number_, column, field}, message);
  }

  bool next_line() {
    if (!std::getline(in_, line_))
      return false;
    ++line_number_;
    if (!line_.empty() && line_.back() == '\r')
      line_.pop_back();
    return true;
  }

  const std::string& line() const { return line_; }
  std::int64_t line_number() const { return line_number_; }
  void at_line(std::int64_t line) { line_number_ = line; }

 private:
  std::istream& in_;
  std::string name_;
  std::string line_;
  std::int64_t line_number_ = 0;
};

double parse_number(const TableReader& reader, const Cell& cell, const std::string& field,
                    const std::string& expected) {
  double value = 0.0;
  const char* end = cell.text.data() + cell.text.size();
  const auto [ptr, ec] = std::from_chars(cell.text.data(), end, value);
  if (cell.text.empty() || ec != std::errc{} || ptr != end || !std::isfinite(value))
    reader.fail(cell.column, field, expected_found(expected, quote_field(cell.text)));
  return value;
}

// The header's probability columns: p_exit_1 ... p_exit_n, n >= 1.
std::size_t read_header(TableReader& reader, std::vector<Cell>& cells) {
  if (!reader.next_line()) {
    reader.at_line(reader.line_number() + 1);
    reader.fail(0, "header", "expected the header row, found end of file");
  }
  split_csv_fields(reader.line(), cells);
  if (cells[0].text != "threshold") {
    reader.fail(cells[0].column, "header",
                expected_found("column \"threshold\"", quote_field(cells[0].text)));
  }
  if (cells.size() < 2) {
    reader.fail(0, "header",
                expected_found("at least one exit column (p_exit_1)", "only \"threshold\""));
  }
  for (std::size_t k = 0; k + 1 < cells.size(); ++k) {
    const std::string expected = probability_column(k);
    if (cells[k + 1].text != expected) {
      reader.fail(cells[k + 1].column, "header",
                  expected_found("column \"" + expected + "\"", quote_field(cells[k + 1].text)));
    }
  }
  return cells.size() - 1;
}

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

ExitTable ExitTable::read(const std::string& path) {
  std::ifstream in(path);
  if (!in)
    throw InputError(SourceLocation{path, 0, 0, ""}, "cannot open the exit table for reading");
  return parse(in, path);
}

ExitTable ExitTable::parse(std::istream& in, const std::string& name) {
  TableReader reader(in, name);
  if (!reader.next_line()) {
    reader.at_line(1);
    reader.fail(
        0, "version",
        expected_found("\"" + std::string(k_exit_table_version_line) + "\"", "an empty file"));
  }
  if (reader.line() != k_exit_table_version_line) {
    reader.fail(
        0, "version",
        expected_found("\"" + std::string(k_exit_table_version_line) + "\"",
                       reader.line().empty() ? "an empty line" : quote_field(reader.line())));
  }
  std::vector<Cell> cells;
  ExitTable table;
  table.source_ = name;
  table.exit_points_ = read_header(reader, cells);
  const std::size_t columns = table.exit_points_ + 1;
  while (reader.next_line()) {
    split_csv_fields(reader.line(), cells);
    if (cells.size() != columns) {
      reader.fail(
          0, "row",
          expected_found(std::to_string(columns) + " fields",
                         reader.line().empty() ? "an empty line" : std::to_string(cells.size())));
    }
    const double threshold = parse_number(reader, cells[0], "threshold", "a finite number");
    if (!table.thresholds_.empty() && threshold <= table.thresholds_.back()) {
      reader.fail(cells[0].column, "threshold",
                  expected_found("a threshold above " + number_text(table.thresholds_.back()) +
                                     " (the previous row's)",
                                 number_text(threshold)));
    }
    double sum = 0.0;
    for (std::size_t k = 0; k < table.exit_points_; ++k) {
      const Cell& cell = cells[k + 1];
      const double p = parse_number(reader, cell, probability_column(k), "a probability in [0, 1]");
      if (p < 0.0 || p > 1.0) {
        reader.fail(cell.column, probability_column(k),
                    expected_found("a probability in [0, 1]", number_text(p)));
      }
      table.probabilities_.push_back(p);
      sum += p;
    }
    if (std::abs(sum - 1.0) > k_sum_tolerance) {
      reader.fail(0, "row",
                  expected_found("probabilities summing to 1", "a sum of " + number_text(sum)));
    }
    table.thresholds_.push_back(threshold);
  }
  if (table.thresholds_.empty()) {
    reader.at_line(reader.line_number() + 1);
    reader.fail(0, "row", "expected at least one threshold row, found end of file");
  }
  return table;
}

void ExitTable::write(std::ostream& out) const {
  out << k_exit_table_version_line << "\nthreshold";
  for (std::size_t k = 0; k < exit_points_; ++k)
    out << ',' << probability_column(k);
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
