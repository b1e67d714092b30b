#pragma once

// What the exit-table and quality-table readers share: line-by-line reading with positions for
// error messages and the field parses, so the two strict readers word their errors alike; and
// the quality-table parser itself, which ExitTable calls when it finds a quality table's
// version line.

#include <cstddef>
#include <cstdint>
#include <istream>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "exitsim/core/csv_fields.hpp"
#include "exitsim/core/csv_lines.hpp"
#include "exitsim/policy/quality_table.hpp"

namespace exitsim::policy::exit {

inline constexpr double k_sum_tolerance = 1e-6;

using TableReader = CsvLineReader;

// "p_exit_<k + 1>".
std::string probability_column(std::size_t k);

// Reads the header line: exactly the `fixed` columns, then p_exit_1 ... p_exit_n with n >= 1.
// Returns n; throws InputError (field "header") otherwise.
std::size_t read_header(TableReader& reader, std::span<const std::string_view> fixed);

// A finite number; otherwise InputError on `field`: "expected <expected>, found <the text>".
double parse_number(const TableReader& reader, const CsvField& cell, const std::string& field,
                    const std::string& expected);

// A non-negative integer; otherwise InputError on `field`: "expected <expected>, found <text>".
std::int64_t parse_count(const TableReader& reader, const CsvField& cell, const std::string& field,
                         const std::string& expected);

// Reads the probabilities cells[first], ... (one per remaining cell), each in [0, 1], appends
// them to `out`, and throws InputError (field "row") unless they sum to 1 within
// k_sum_tolerance.
void parse_exit_distribution(const TableReader& reader, std::span<const CsvField> cells,
                             std::vector<double>& out);

// A quality table read after its version line, with the line each row came from.
struct ParsedQualityTable {
  QualityTable table;
  std::vector<std::int64_t> lines;
};
ParsedQualityTable parse_quality_table(TableReader& reader);

}  // namespace exitsim::policy::exit
