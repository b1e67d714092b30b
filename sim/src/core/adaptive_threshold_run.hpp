#pragma once

// FREE's adaptive threshold (exit_policy.kind: adaptive_threshold) in the simulator, by the
// executors' shared rule (docs/exit_policies.md, "adaptive_threshold"): one estimator per
// replica; at each step, before exits are decided, on_admissions(first admissions of the step);
// the step's exits at the estimator's threshold; after each deferred_fill pass whose states reach
// the top, one calibration pair per completed state (its confidence at the exit point it left at,
// whether its prediction there agrees with the deep one), then one per exit point below the top
// that the deep token passed, in batch row order, the states oldest first.
//
// Where the simulator takes a token's confidences and agreements from (ConfidenceSource):
// - DrawnConfidences: `exit_policy.calibration_table` (what `engine eval` measured). Each exit
//   point's confidence is drawn on its own from the point's measured distribution (the simulator
//   has no model: confidences of one token at successive points are independent, which real ones
//   are not), and the agreement at a point ~ Bernoulli(the table's agreement rate of the bin the
//   confidence falls in). Draws are keyed by the token (policy::exit_draws: draw 1 + p is the
//   confidence at point p, draw 1 + P + p its agreement, P = exit points below the top), so a
//   run is deterministic and independent of batch composition.
// - TracedConfidences: a replayed token trace (the conformance suite): the engine's own
//   confidences and agreement flags, so that both executors feed the estimator identical pairs.
//   Interface with the engine side: the token trace's `confidences` and `agreements` columns
//   (docs/traces.md), one add_row() per row. The simulator reads a token's confidences when it
//   decides its exit, and its flags when the token gives pairs: a state that reached the top
//   (the flag at its exit point) or a deep token that carried a fill there (one per point below
//   the top). A confidence the simulator's pairs need that the engine never probed (the two
//   executors' exits differ) is an input error naming the trace, never a guessed value.

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "exitsim/core/ids.hpp"
#include "exitsim/core/random.hpp"
#include "exitsim/core/time.hpp"
#include "exitsim/policy/adaptive_threshold.hpp"
#include "exitsim/policy/calibration_table.hpp"
#include "exitsim/scenario/scenario.hpp"

namespace exitsim::sim {

class ConfidenceSource {
 public:
  virtual ~ConfidenceSource() = default;
  // Token (request, position)'s confidences and agreement flags at the exit points below the top
  // (both spans that long).
  virtual void token(RequestId request, std::int64_t position, std::span<double> confidences,
                     std::span<std::uint8_t> agrees) const = 0;
};

class DrawnConfidences final : public ConfidenceSource {
 public:
  DrawnConfidences(std::shared_ptr<const policy::CalibrationTable> table, std::uint64_t seed);
  void token(RequestId request, std::int64_t position, std::span<double> confidences,
             std::span<std::uint8_t> agrees) const override;

 private:
  std::shared_ptr<const policy::CalibrationTable> table_;
  KeyedUniform draws_;
  mutable std::vector<double> uniforms_;  // one token's draws
};

// The source `config` names: the engine's token trace `exit_policy.confidence_trace` when set
// (TracedConfidences), else the calibration table `exit_policy.calibration_table` (required;
// its measure must be exit_policy.confidence_measure and its exit points the model's less the
// full depth, `points_below_top`). Throws InputError naming the key otherwise.
std::unique_ptr<ConfidenceSource> make_confidence_source(const scenario::ExitPolicyConfig& config,
                                                         std::size_t points_below_top,
                                                         std::uint64_t seed);

class TracedConfidences final : public ConfidenceSource {
 public:
  TracedConfidences(std::size_t points_below_top, std::string source);
  // One token trace row (traces::TokenTraceRow's `confidences` and `agreements` columns, as the
  // engine writes them): `confidences` from the first exit point on, as far as the token was
  // probed; `agreements` in the order the estimator received them: one, at `exit_point`, for a
  // token whose pending state reached the top; one per point below the top for a deep token that
  // carried a fill to the top; none otherwise. Throws InputError naming the source for a row
  // with more values than the model has points below the top, or an agreement count that is
  // neither.
  void add_row(std::uint64_t request, std::int64_t position, int exit_point,
               std::span<const double> confidences, std::span<const std::uint8_t> agreements);
  // Values not recorded read as NaN confidences (a pair that needs one is an error) and 0 flags.
  void token(RequestId request, std::int64_t position, std::span<double> confidences,
             std::span<std::uint8_t> agrees) const override;
  const std::string& source() const { return source_; }

 private:
  struct Token {
    std::vector<double> confidences;  // per point below the top; NaN = not probed
    std::vector<std::uint8_t> agrees;
  };
  std::size_t points_ = 0;
  std::map<std::pair<std::uint64_t, std::int64_t>, Token> tokens_;  // by request, position
  std::string source_;
};

// One refit attempt, as the run's threshold trajectory records it.
struct ThresholdTrajectoryPoint {
  std::int64_t step = 0;  // the replica's step index (0-based)
  TimeNs time = 0;        // the step's start
  int replica = 0;
  policy::ThresholdRefit refit;
};

// A pending deferred-fill state's calibration pair, waiting for the deep prediction.
struct PendingPair {
  double confidence = 0.0;
  bool agrees = false;
};

// The estimator of one replica and what it logged.
class AdaptiveThresholdRun {
 public:
  AdaptiveThresholdRun(const policy::AdaptiveThresholdSettings& settings,
                       std::unique_ptr<ConfidenceSource> source, std::size_t points_below_top,
                       int replica);

  double threshold() const { return estimator_.threshold(); }
  double initial_threshold() const { return initial_threshold_; }
  const policy::ThresholdEstimator& estimator() const { return estimator_; }
  const ConfidenceSource& source() const { return *source_; }
  std::size_t points_below_top() const { return points_; }
  // Rule step 2: `admitted` first admissions in step `step` starting at `now`.
  void on_admissions(std::int64_t admitted, std::int64_t step, TimeNs now);
  // A token that left at exit point `point` below the top: its state's pair waits.
  static void on_state_waits(std::vector<PendingPair>& pending, double confidence, bool agrees) {
    pending.push_back({confidence, agrees});
  }
  // A parallel pass reached the top: the waiting pairs (oldest first), then the deep token's own
  // at every point below the top; `pending` is emptied.
  void on_fill_complete(std::vector<PendingPair>& pending, std::span<const double> confidences,
                        std::span<const std::uint8_t> agrees);
  const std::vector<ThresholdTrajectoryPoint>& trajectory() const { return trajectory_; }

 private:
  policy::ThresholdEstimator estimator_;
  double initial_threshold_ = 0.0;
  std::unique_ptr<ConfidenceSource> source_;
  std::size_t points_ = 0;
  int replica_ = 0;
  std::vector<ThresholdTrajectoryPoint> trajectory_;
};

}  // namespace exitsim::sim
