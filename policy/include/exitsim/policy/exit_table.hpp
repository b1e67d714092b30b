#pragma once

// The threshold table: for each confidence threshold the engine measured, the fraction of
// tokens that exited at each exit point. The simulator turns a `confidence` (or `oracle`) exit
// policy into a `distribution` through it. Format (docs/exit_policies.md):
//
//   # exitsim-exit-table v1
//   threshold,p_exit_1,p_exit_2,p_exit_3
//   0.5,0.6,0.3,0.1
//   0.9,0.2,0.3,0.5
//
// A quality table (quality_table.hpp), which `exitsim engine eval` writes, serves as well: its
// `confidence` rows are the thresholds.

#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "exitsim/policy/quality_table.hpp"

namespace exitsim::policy {

inline constexpr std::string_view k_exit_table_version_line = "# exitsim-exit-table v1";

class ExitTable {
 public:
  // Thresholds strictly ascending and finite; one distribution per threshold, each with the
  // same number (>= 1) of probabilities in [0, 1] summing to 1 within 1e-6. Throws
  // std::invalid_argument otherwise. `source` names the table in error messages.
  ExitTable(std::vector<double> thresholds, std::vector<std::vector<double>> distributions,
            std::string source = "<exit table>");

  // Strict readers: any malformed content throws InputError with the file, line, column and
  // field (version, header, row, threshold or p_exit_<k>) and an "expected X, found Y" message.
  // The version line decides the format: an exit table, or a quality table read as
  // from_quality_table() reads it (with the line of the offending row in its errors).
  // For a quality table, its confidence rows measured under `strategy` (an exit table, which
  // names no strategy, serves every strategy).
  static ExitTable read(const std::string& path, std::string_view strategy);
  static ExitTable parse(std::istream& in, const std::string& name, std::string_view strategy);

  // The `confidence` rows of a quality table measured under `strategy`, thresholds ascending.
  // Throws InputError (naming the table's source) when it has none, or rows of both confidence
  // measures: a threshold means something different under each, so one table must hold one
  // measure.
  static ExitTable from_quality_table(const QualityTable& table, std::string_view strategy);

  // Writes the format above; numbers in their shortest exact form, so parse() reads back an
  // equal table.
  void write(std::ostream& out) const;

  std::size_t exit_points() const { return exit_points_; }
  std::size_t rows() const { return thresholds_.size(); }
  std::span<const double> thresholds() const { return thresholds_; }
  std::span<const double> distribution(std::size_t row) const;
  const std::string& source() const { return source_; }
  // The confidence measure ("top1" or "margin") of a table read from a quality table; empty for
  // an exit table, whose format does not say.
  const std::string& measure() const { return measure_; }

  // The exit distribution at `threshold`: a row's own when it is in the table, otherwise the
  // linear interpolation between the neighbouring rows. Throws InputError (field
  // exit_policy.threshold) outside [first threshold, last threshold].
  std::vector<double> exit_distribution_for(double threshold) const;

  friend bool operator==(const ExitTable& a, const ExitTable& b) {
    return a.exit_points_ == b.exit_points_ && a.thresholds_ == b.thresholds_ &&
           a.probabilities_ == b.probabilities_;
  }

 private:
  ExitTable() = default;
  // from_quality_table(), with lines[i] the line row i was read from (for errors) when known.
  static ExitTable from_quality_rows(const QualityTable& table, std::span<const std::int64_t> lines,
                                     std::string_view strategy);

  std::size_t exit_points_ = 0;
  std::vector<double> thresholds_;
  std::vector<double> probabilities_;  // row-major, rows() x exit_points()
  std::string source_;
  std::string measure_;
};

}  // namespace exitsim::policy
