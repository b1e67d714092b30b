#include "adaptive_threshold_run.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "exitsim/core/error.hpp"
#include "exitsim/policy/exit_policy.hpp"
#include "exitsim/sim/inputs/shared_inputs.hpp"
#include "exitsim/traces/token_trace.hpp"

namespace exitsim::sim {

DrawnConfidences::DrawnConfidences(std::shared_ptr<const policy::CalibrationTable> table,
                                   std::uint64_t seed)
    : table_(std::move(table)), draws_(policy::exit_draws(seed)) {}

void DrawnConfidences::token(RequestId request, std::int64_t position,
                             std::span<double> confidences, std::span<std::uint8_t> agrees) const {
  const std::size_t points = confidences.size();
  // Draw 0 is the exit draw of the distribution policies: these start after it.
  uniforms_.resize(1 + 2 * points);
  draws_.fill(request.value, static_cast<std::uint64_t>(position), uniforms_);
  for (std::size_t p = 0; p < points; ++p) {
    confidences[p] = table_->sample_confidence(p, uniforms_[1 + p]);
    agrees[p] =
        uniforms_[1 + points + p] < table_->agreement_probability(p, confidences[p]) ? 1 : 0;
  }
}

std::unique_ptr<ConfidenceSource> make_confidence_source(const scenario::ExitPolicyConfig& config,
                                                         std::size_t points_below_top,
                                                         std::uint64_t seed) {
  if (!config.confidence_trace.empty()) {
    auto traced = std::make_unique<TracedConfidences>(points_below_top, config.confidence_trace);
    traces::TokenTraceReader reader(config.confidence_trace);
    while (const std::optional<traces::TokenTraceRow> row = reader.next()) {
      traced->add_row(row->request_id, row->position, row->exit_point, row->confidences,
                      row->agreements);
    }
    return traced;
  }
  const SourceLocation key{"", 0, 0, "exit_policy.calibration_table"};
  if (config.calibration_table.empty()) {
    throw InputError(key, expected_found("the engine's calibration table (`exitsim engine eval` "
                                         "writes it): the simulator draws adaptive_threshold's "
                                         "confidences and agreements from it",
                                         "none"));
  }
  std::shared_ptr<const policy::CalibrationTable> table =
      shared_calibration_table(config.calibration_table);
  if (table->measure() != config.confidence_measure) {
    throw InputError(key, expected_found(fmt::format("a table of measure \"{}\" "
                                                     "(exit_policy.confidence_measure)",
                                                     config.confidence_measure),
                                         fmt::format("\"{}\" in {}", table->measure(),
                                                     config.calibration_table)));
  }
  if (table->exit_points() != points_below_top) {
    throw InputError(key, expected_found(fmt::format("{} exit points (the model's {} less the "
                                                     "full depth)",
                                                     points_below_top, points_below_top + 1),
                                         fmt::format("{} in {}", table->exit_points(),
                                                     config.calibration_table)));
  }
  return std::make_unique<DrawnConfidences>(std::move(table), seed);
}

TracedConfidences::TracedConfidences(std::size_t points_below_top, std::string source)
    : points_(points_below_top), source_(std::move(source)) {}

void TracedConfidences::add_row(std::uint64_t request, std::int64_t position, int exit_point,
                                std::span<const double> confidences,
                                std::span<const std::uint8_t> agreements) {
  const auto where = [&](const char* field) { return SourceLocation{source_, 0, 0, field}; };
  const auto token_name = fmt::format("request {} position {}", request, position);
  if (confidences.size() > points_) {
    throw InputError(where("confidences"),
                     expected_found(fmt::format("at most {} values (the exit points below the "
                                                "top) for {}",
                                                points_, token_name),
                                    std::to_string(confidences.size())));
  }
  Token token;
  token.confidences.assign(points_, std::numeric_limits<double>::quiet_NaN());
  token.agrees.assign(points_, 0);
  std::copy(confidences.begin(), confidences.end(), token.confidences.begin());
  if (agreements.size() == points_ && points_ != 1) {
    std::copy(agreements.begin(), agreements.end(), token.agrees.begin());
  } else if (agreements.size() == 1 && exit_point >= 0 &&
             static_cast<std::size_t>(exit_point) < points_) {
    token.agrees[static_cast<std::size_t>(exit_point)] = agreements[0];
  } else if (agreements.size() == 1 && points_ == 1) {
    token.agrees[0] = agreements[0];  // one point below the top: both readings agree
  } else if (!agreements.empty()) {
    throw InputError(where("agreements"),
                     expected_found(fmt::format("none, one (a filled state's) or {} (a deep "
                                                "token's) flags for {}",
                                                points_, token_name),
                                    std::to_string(agreements.size())));
  }
  tokens_[{request, position}] = std::move(token);
}

void TracedConfidences::token(RequestId request, std::int64_t position,
                              std::span<double> confidences, std::span<std::uint8_t> agrees) const {
  const auto found = tokens_.find({request.value, position});
  if (found == tokens_.end()) {
    throw InputError(
        {source_, 0, 0, "confidences"},
        expected_found(fmt::format("a row for request {} position {}", request.value, position),
                       "none (the trace is of another run)"));
  }
  std::copy(found->second.confidences.begin(), found->second.confidences.end(),
            confidences.begin());
  std::copy(found->second.agrees.begin(), found->second.agrees.end(), agrees.begin());
}

AdaptiveThresholdRun::AdaptiveThresholdRun(const policy::AdaptiveThresholdSettings& settings,
                                           std::unique_ptr<ConfidenceSource> source,
                                           std::size_t points_below_top, int replica)
    : estimator_(settings),
      initial_threshold_(settings.initial_threshold),
      source_(std::move(source)),
      points_(points_below_top),
      replica_(replica) {}

void AdaptiveThresholdRun::on_admissions(std::int64_t admitted, std::int64_t step, TimeNs now) {
  if (std::optional<policy::ThresholdRefit> refit = estimator_.on_admissions(admitted))
    trajectory_.push_back({step, now, replica_, *refit});
}

namespace {

// A pair the simulator needs whose confidence the replayed trace never evaluated: the engine's
// exits differed from the simulator's (a conformance failure), not a value to guess.
void check_evaluated(double confidence) {
  if (std::isnan(confidence)) {
    throw InputError({"", 0, 0, "exit_policy.token_trace"},
                     expected_found("a confidence at every exit point a calibration pair reads",
                                    "a point the engine never evaluated"));
  }
}

}  // namespace

void AdaptiveThresholdRun::on_fill_complete(std::vector<PendingPair>& pending,
                                            std::span<const double> confidences,
                                            std::span<const std::uint8_t> agrees) {
  for (const PendingPair& pair : pending) {
    check_evaluated(pair.confidence);
    estimator_.add_pair(pair.confidence, pair.agrees);
  }
  pending.clear();
  for (std::size_t p = 0; p < points_; ++p) {
    check_evaluated(confidences[p]);
    estimator_.add_pair(confidences[p], agrees[p] != 0);
  }
}

}  // namespace exitsim::sim
