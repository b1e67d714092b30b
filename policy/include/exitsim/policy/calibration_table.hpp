#pragma once

// The calibration table: for each exit point below the full depth, how a model's confidences are
// distributed there and how often the prediction made there agrees with the full-depth one, in
// confidence bins. `exitsim engine eval` measures it on an evaluation text; the simulator draws
// the confidences of `adaptive_threshold` tokens and the agreement of their calibration pairs
// from it (adaptive_threshold.hpp). Format (docs/exit_policies.md, "Calibration table"):
//
//   # exitsim-calibration-table v1
//   measure,exit_point,confidence_low,confidence_high,tokens,agreeing
//   margin,1,0,0.1,812,95
//   margin,1,0.1,0.2,440,131
//   ...
//
// One measure per table; exit points 1-based, ascending; each point's bins ascending,
// contiguous and covering [0, 1]; 0 <= agreeing <= tokens; every point with at least one token.

#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace exitsim::policy {

inline constexpr std::string_view k_calibration_table_version_line =
    "# exitsim-calibration-table v1";

struct CalibrationBin {
  double low = 0.0;  // confidences in [low, high); the last bin of a point includes 1
  double high = 0.0;
  std::int64_t tokens = 0;
  std::int64_t agreeing = 0;  // of them, those whose prediction there is the full-depth one

  friend bool operator==(const CalibrationBin&, const CalibrationBin&) = default;
};

class CalibrationTable {
 public:
  // Bins per exit point as the format requires; throws std::invalid_argument otherwise, so
  // what write() writes always reads back. `source` names the table in error messages.
  CalibrationTable(std::string measure, std::vector<std::vector<CalibrationBin>> points,
                   std::string source = "<calibration table>");

  // Strict readers: malformed content throws InputError with the file, line, column and field
  // (version, header, measure, exit_point, confidence_low, ...) and "expected X, found Y".
  static CalibrationTable read(const std::string& path);
  static CalibrationTable parse(std::istream& in, const std::string& name);
  // Numbers in their shortest exact form: parse() reads back an equal table.
  void write(std::ostream& out) const;

  const std::string& measure() const { return measure_; }
  const std::string& source() const { return source_; }
  // Exit points measured: the model's exit points less the full depth.
  std::size_t exit_points() const { return points_.size(); }
  std::span<const CalibrationBin> bins(std::size_t point) const { return points_.at(point); }

  // A confidence drawn from exit point `point`'s measured distribution by one uniform draw on
  // [0, 1): a bin by its share of the point's tokens, then uniformly within the bin.
  double sample_confidence(std::size_t point, double uniform) const;
  // The measured agreement rate of the bin holding `confidence` at `point`; the point's overall
  // rate for a bin without tokens (no draw lands there, but a replayed confidence may).
  double agreement_probability(std::size_t point, double confidence) const;

  friend bool operator==(const CalibrationTable& a, const CalibrationTable& b) {
    return a.measure_ == b.measure_ && a.points_ == b.points_;
  }

 private:
  std::string measure_;
  std::vector<std::vector<CalibrationBin>> points_;
  std::string source_;
};

// Collects (exit point, confidence, agrees) observations into `bins` equal-width bins per point.
class CalibrationCounter {
 public:
  CalibrationCounter(std::string measure, std::size_t exit_points, std::size_t bins);
  // `point` 0-based below the full depth, confidence in [0, 1].
  void add(std::size_t point, double confidence, bool agrees);
  // Throws std::invalid_argument when a point saw no token.
  CalibrationTable table(std::string source) const;

 private:
  std::string measure_;
  std::size_t bins_ = 0;
  std::vector<CalibrationBin> counts_;  // point-major
};

}  // namespace exitsim::policy
