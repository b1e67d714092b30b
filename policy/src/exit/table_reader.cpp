#include "exit/table_reader.hpp"

#include <charconv>
#include <cmath>

#include "exit/exit_policies.hpp"
#include "exitsim/core/error.hpp"

namespace exitsim::policy::exit {

std::string probability_column(std::size_t k) {
  return "p_exit_" + std::to_string(k + 1);
}

std::size_t read_header(TableReader& reader, std::span<const std::string_view> fixed) {
  if (!reader.next_line())
    reader.fail_at_end("header", "expected the header row, found end of file");
  std::vector<CsvField> cells;
  split_csv_fields(reader.line(), cells);
  for (std::size_t i = 0; i < fixed.size(); ++i) {
    const std::string expected = "column \"" + std::string(fixed[i]) + "\"";
    if (i >= cells.size())
      reader.fail(0, "header", expected_found(expected, "the end of the header"));
    if (cells[i].text != fixed[i])
      reader.fail(cells[i].column, "header", expected_found(expected, quote_field(cells[i].text)));
  }
  if (cells.size() == fixed.size()) {
    // A one-column prefix reads better quoted whole; a longer one is named by its last column.
    const std::string found = fixed.size() == 1
                                  ? "only \"" + std::string(fixed[0]) + "\""
                                  : "nothing after \"" + std::string(fixed.back()) + "\"";
    reader.fail(0, "header", expected_found("at least one exit column (p_exit_1)", found));
  }
  for (std::size_t k = 0; fixed.size() + k < cells.size(); ++k) {
    const CsvField& cell = cells[fixed.size() + k];
    const std::string expected = probability_column(k);
    if (cell.text != expected) {
      reader.fail(cell.column, "header",
                  expected_found("column \"" + expected + "\"", quote_field(cell.text)));
    }
  }
  return cells.size() - fixed.size();
}

double parse_number(const TableReader& reader, const CsvField& cell, const std::string& field,
                    const std::string& expected) {
  double value = 0.0;
  const char* end = cell.text.data() + cell.text.size();
  const auto [ptr, ec] = std::from_chars(cell.text.data(), end, value);
  if (cell.text.empty() || ec != std::errc{} || ptr != end || !std::isfinite(value))
    reader.fail(cell.column, field, expected_found(expected, quote_field(cell.text)));
  return value;
}

std::int64_t parse_count(const TableReader& reader, const CsvField& cell, const std::string& field,
                         const std::string& expected) {
  std::int64_t value = 0;
  const char* end = cell.text.data() + cell.text.size();
  const auto [ptr, ec] = std::from_chars(cell.text.data(), end, value);
  if (cell.text.empty() || ec != std::errc{} || ptr != end || value < 0)
    reader.fail(cell.column, field, expected_found(expected, quote_field(cell.text)));
  return value;
}

void parse_exit_distribution(const TableReader& reader, std::span<const CsvField> cells,
                             std::vector<double>& out) {
  const std::string expected = "a probability in [0, 1]";
  double sum = 0.0;
  for (std::size_t k = 0; k < cells.size(); ++k) {
    const double p = parse_number(reader, cells[k], probability_column(k), expected);
    if (p < 0.0 || p > 1.0)
      reader.fail(cells[k].column, probability_column(k), expected_found(expected, number_text(p)));
    out.push_back(p);
    sum += p;
  }
  if (std::abs(sum - 1.0) > k_sum_tolerance) {
    reader.fail(0, "row",
                expected_found("probabilities summing to 1", "a sum of " + number_text(sum)));
  }
}

}  // namespace exitsim::policy::exit
