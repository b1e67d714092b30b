#include "exitsim/policy/calibration_table.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <fstream>
#include <ostream>
#include <stdexcept>

#include "exit/exit_policies.hpp"
#include "exit/table_reader.hpp"
#include "exitsim/core/error.hpp"

namespace exitsim::policy {
namespace {

using exit::number_text;

constexpr std::array<std::string_view, 6> k_columns = {
    "measure", "exit_point", "confidence_low", "confidence_high", "tokens", "agreeing"};

// What is wrong with bin `bin` of a point whose earlier bins are `before`, or empty.
std::string bin_problem(const CalibrationBin& bin, std::span<const CalibrationBin> before,
                        std::string& field) {
  const double expected_low = before.empty() ? 0.0 : before.back().high;
  if (bin.low != expected_low) {
    field = "confidence_low";
    return expected_found(
        number_text(expected_low) +
            (before.empty() ? " (a point's bins start at 0)" : " (the previous bin's high)"),
        number_text(bin.low));
  }
  if (!(bin.high > bin.low && bin.high <= 1.0)) {
    field = "confidence_high";
    return expected_found("a number in (" + number_text(bin.low) + ", 1]", number_text(bin.high));
  }
  if (bin.agreeing > bin.tokens) {
    field = "agreeing";
    return expected_found("at most " + std::to_string(bin.tokens) + " (the bin's tokens)",
                          std::to_string(bin.agreeing));
  }
  return {};
}

std::int64_t point_tokens(std::span<const CalibrationBin> bins) {
  std::int64_t total = 0;
  for (const CalibrationBin& bin : bins)
    total += bin.tokens;
  return total;
}

// The point's last bin ends at 1 and the point saw a token; empty when so.
std::string point_problem(std::span<const CalibrationBin> bins) {
  if (bins.empty() || bins.back().high != 1.0)
    return "bins covering [0, 1]";
  if (point_tokens(bins) == 0)
    return "at least one token";
  return {};
}

void read_header(exit::TableReader& reader) {
  if (!reader.next_line())
    reader.fail_at_end("header", "expected the header row, found end of file");
  std::vector<CsvField> cells;
  split_csv_fields(reader.line(), cells);
  for (std::size_t i = 0; i < k_columns.size(); ++i) {
    const std::string expected = "column \"" + std::string(k_columns[i]) + "\"";
    if (i >= cells.size())
      reader.fail(0, "header", expected_found(expected, "the end of the header"));
    if (cells[i].text != k_columns[i])
      reader.fail(cells[i].column, "header", expected_found(expected, quote_field(cells[i].text)));
  }
  if (cells.size() > k_columns.size()) {
    reader.fail(cells[k_columns.size()].column, "header",
                expected_found("the end of the header", quote_field(cells[k_columns.size()].text)));
  }
}

}  // namespace

CalibrationTable::CalibrationTable(std::string measure,
                                   std::vector<std::vector<CalibrationBin>> points,
                                   std::string source)
    : measure_(std::move(measure)), points_(std::move(points)), source_(std::move(source)) {
  if (!parse_confidence_measure(measure_) || points_.empty())
    throw std::invalid_argument("calibration table: a measure and at least one exit point");
  for (const std::vector<CalibrationBin>& bins : points_) {
    std::string field;
    for (std::size_t b = 0; b < bins.size(); ++b) {
      const std::string problem = bin_problem(bins[b], std::span(bins).first(b), field);
      if (!problem.empty())
        throw std::invalid_argument("calibration table: " + field + ": " + problem);
    }
    const std::string problem = point_problem(bins);
    if (!problem.empty())
      throw std::invalid_argument("calibration table: expected " + problem + " at every point");
  }
}

CalibrationTable CalibrationTable::read(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    throw InputError(SourceLocation{path, 0, 0, ""},
                     "cannot open the calibration table for reading");
  }
  return parse(in, path);
}

CalibrationTable CalibrationTable::parse(std::istream& in, const std::string& name) {
  exit::TableReader reader(in, name);
  reader.next_line();
  reader.check_version(k_calibration_table_version_line);
  read_header(reader);
  std::string measure;
  std::vector<std::vector<CalibrationBin>> points;
  const auto finish_point = [&](const std::string& where) {
    const std::string problem = point_problem(points.back());
    if (!problem.empty()) {
      reader.fail(
          0, "exit_point",
          expected_found(problem + " at exit point " + std::to_string(points.size()), where));
    }
  };
  while (reader.next_content_line()) {
    const std::vector<CsvField>& cells = reader.split_row(k_columns.size());
    if (measure.empty()) {
      measure = cells[0].text;
      if (!parse_confidence_measure(measure))
        reader.fail(cells[0].column, "measure",
                    expected_found("top1 or margin", quote_field(measure)));
    } else if (cells[0].text != measure) {
      reader.fail(cells[0].column, "measure",
                  expected_found("\"" + measure + "\" (one measure per table)",
                                 quote_field(cells[0].text)));
    }
    const std::int64_t point =
        exit::parse_count(reader, cells[1], "exit_point", "an exit point >= 1");
    const auto current = static_cast<std::int64_t>(points.size());
    if (point == current + 1) {
      if (!points.empty())
        finish_point("a row of exit point " + std::to_string(point));
      points.emplace_back();
    } else if (point != current || point == 0) {
      reader.fail(
          cells[1].column, "exit_point",
          expected_found(current == 0 ? "exit point 1"
                                      : fmt::format("exit point {} or {}", current, current + 1),
                         quote_field(cells[1].text)));
    }
    CalibrationBin bin;
    bin.low = exit::parse_number(reader, cells[2], "confidence_low", "a number in [0, 1)");
    bin.high = exit::parse_number(reader, cells[3], "confidence_high", "a number in (0, 1]");
    bin.tokens = exit::parse_count(reader, cells[4], "tokens", "a token count >= 0");
    bin.agreeing = exit::parse_count(reader, cells[5], "agreeing", "a token count >= 0");
    std::string field;
    const std::string problem = bin_problem(bin, points.back(), field);
    if (!problem.empty()) {
      const std::size_t column = field == "confidence_low" ? 2 : field == "confidence_high" ? 3 : 5;
      reader.fail(cells[column].column, field, problem);
    }
    points.back().push_back(bin);
  }
  if (points.empty())
    reader.fail_at_end("row", "expected at least one bin row, found end of file");
  const std::string problem = point_problem(points.back());
  if (!problem.empty()) {
    reader.fail_at_end(
        "exit_point",
        expected_found(problem + " at exit point " + std::to_string(points.size()), "end of file"));
  }
  return CalibrationTable(measure, std::move(points), name);
}

void CalibrationTable::write(std::ostream& out) const {
  out << k_calibration_table_version_line << '\n';
  for (std::size_t i = 0; i < k_columns.size(); ++i)
    out << (i == 0 ? "" : ",") << k_columns[i];
  out << '\n';
  for (std::size_t p = 0; p < points_.size(); ++p) {
    for (const CalibrationBin& bin : points_[p]) {
      out << measure_ << ',' << p + 1 << ',' << number_text(bin.low) << ',' << number_text(bin.high)
          << ',' << bin.tokens << ',' << bin.agreeing << '\n';
    }
  }
}

double CalibrationTable::sample_confidence(std::size_t point, double uniform) const {
  const std::vector<CalibrationBin>& bins = points_.at(point);
  const double total = static_cast<double>(point_tokens(bins));
  const double target = std::clamp(uniform, 0.0, 1.0) * total;
  double before = 0.0;
  for (const CalibrationBin& bin : bins) {
    const auto tokens = static_cast<double>(bin.tokens);
    if (bin.tokens > 0 && target < before + tokens) {
      const double within = (target - before) / tokens;
      return bin.low + within * (bin.high - bin.low);
    }
    before += tokens;
  }
  // uniform rounded up to the total: the top of the last bin with tokens.
  for (auto bin = bins.rbegin(); bin != bins.rend(); ++bin) {
    if (bin->tokens > 0)
      return bin->high;
  }
  return 1.0;  // unreachable: every point has a token
}

double CalibrationTable::agreement_probability(std::size_t point, double confidence) const {
  const std::vector<CalibrationBin>& bins = points_.at(point);
  for (std::size_t b = 0; b < bins.size(); ++b) {
    const CalibrationBin& bin = bins[b];
    const bool last = b + 1 == bins.size();
    if (confidence < bin.high || last) {
      if (bin.tokens > 0)
        return static_cast<double>(bin.agreeing) / static_cast<double>(bin.tokens);
      break;
    }
  }
  std::int64_t agreeing = 0;
  for (const CalibrationBin& bin : bins)
    agreeing += bin.agreeing;
  return static_cast<double>(agreeing) / static_cast<double>(point_tokens(bins));
}

CalibrationCounter::CalibrationCounter(std::string measure, std::size_t exit_points,
                                       std::size_t bins)
    : measure_(std::move(measure)), bins_(bins), counts_(exit_points * bins) {
  if (bins == 0 || exit_points == 0)
    throw std::invalid_argument("calibration counter: at least one exit point and one bin");
  for (std::size_t p = 0; p < exit_points; ++p) {
    for (std::size_t b = 0; b < bins; ++b) {
      CalibrationBin& bin = counts_[p * bins + b];
      // Edges as b / bins, so that adjacent bins share one exact edge and the last ends at 1.
      bin.low = static_cast<double>(b) / static_cast<double>(bins);
      bin.high = static_cast<double>(b + 1) / static_cast<double>(bins);
    }
  }
}

void CalibrationCounter::add(std::size_t point, double confidence, bool agrees) {
  if (point >= counts_.size() / bins_ || !(confidence >= 0.0 && confidence <= 1.0))
    throw std::invalid_argument("calibration counter: exit point or confidence out of range");
  const auto b =
      std::min(bins_ - 1, static_cast<std::size_t>(confidence * static_cast<double>(bins_)));
  CalibrationBin& bin = counts_[point * bins_ + b];
  bin.tokens += 1;
  bin.agreeing += agrees ? 1 : 0;
}

CalibrationTable CalibrationCounter::table(std::string source) const {
  std::vector<std::vector<CalibrationBin>> points;
  for (std::size_t start = 0; start < counts_.size(); start += bins_)
    points.emplace_back(counts_.begin() + static_cast<std::ptrdiff_t>(start),
                        counts_.begin() + static_cast<std::ptrdiff_t>(start + bins_));
  return CalibrationTable(measure_, std::move(points), std::move(source));
}

}  // namespace exitsim::policy
