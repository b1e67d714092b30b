// Validation of exit-policy parameters against the model, and the factory. Every error names the
// scenario key at fault, so the simulator can pass the scenario's values straight through.

#include <cmath>
#include <numeric>
#include <stdexcept>

#include "exit/exit_policies.hpp"
#include "exitsim/core/error.hpp"

namespace exitsim::policy {
namespace {

using exit::number_text;

std::string indexed(const std::string& list, std::size_t i, const std::string& member) {
  return list + "[" + std::to_string(i) + "]." + member;
}

std::string int_list(std::span<const int> values) {
  std::string text;
  for (const int v : values)
    text += (text.empty() ? "" : ", ") + std::to_string(v);
  return text;
}

void check_finite(double value, const std::string& field) {
  if (!std::isfinite(value))
    throw_setting_error(field, "a finite number", number_text(value));
}

void check_probabilities(const std::vector<double>& p, std::size_t exit_points,
                         const std::string& field) {
  if (p.size() != exit_points) {
    throw_setting_error(field,
                        "one probability per exit point (" + std::to_string(exit_points) + ")",
                        std::to_string(p.size()));
  }
  for (const double x : p) {
    if (!(x >= 0.0 && x <= 1.0))
      throw_setting_error(field, "probabilities in [0, 1]", number_text(x));
  }
  const double sum = std::accumulate(p.begin(), p.end(), 0.0);
  if (std::abs(sum - 1.0) > 1e-6)
    throw_setting_error(field, "probabilities summing to 1", "a sum of " + number_text(sum));
}

void check_buckets(const std::vector<ExitPositionBucket>& buckets, std::size_t exit_points) {
  const std::string list = "exit_policy.position_buckets";
  for (std::size_t i = 0; i < buckets.size(); ++i) {
    const std::int64_t until = buckets[i].until_position;
    const std::int64_t floor = i == 0 ? 0 : buckets[i - 1].until_position;
    if (until <= floor) {
      throw_setting_error(
          indexed(list, i, "until_position"),
          i == 0 ? "a position of at least 1"
                 : "a position above " + std::to_string(floor) + " (the previous bucket's)",
          std::to_string(until));
    }
    check_probabilities(buckets[i].probabilities, exit_points, indexed(list, i, "probabilities"));
  }
}

void check_schedule(const std::vector<ExitScheduleStep>& steps, std::span<const int> points) {
  const std::string list = "exit_policy.schedule";
  if (steps.empty())
    throw_setting_error(list, "at least one step", "none");
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const ExitScheduleStep& step = steps[i];
    if (i == 0 && step.from_position != 0) {
      throw_setting_error(indexed(list, i, "from_position"), "0 for the first step",
                          std::to_string(step.from_position));
    }
    if (i > 0 && step.from_position <= steps[i - 1].from_position) {
      throw_setting_error(indexed(list, i, "from_position"),
                          "a position above " + std::to_string(steps[i - 1].from_position) +
                              " (the previous step's)",
                          std::to_string(step.from_position));
    }
    if (step.depth < 1 || step.depth > points.back()) {
      throw_setting_error(
          indexed(list, i, "depth"),
          "a depth in [1, " + std::to_string(points.back()) + "] (the deepest exit point)",
          std::to_string(step.depth));
    }
    if (i > 0 && step.depth > steps[i - 1].depth) {
      throw_setting_error(indexed(list, i, "depth"),
                          "a depth <= " + std::to_string(steps[i - 1].depth) +
                              " (the previous step's; depth must not increase with position)",
                          std::to_string(step.depth));
    }
  }
}

// Router scores are per recursion and exits are per exit point; the two line up only when the
// exit points are the ends of the recursions.
void check_router_model(const std::string& kind, const DepthStructure& depth,
                        std::span<const int> points) {
  if (!depth.is_recursive()) {
    throw_setting_error("exit_policy.kind", "a recursive model for " + kind,
                        "model.depth.recursions 0");
  }
  DepthStructure defaults = depth;
  defaults.exit_points.clear();
  const std::vector<int> ends = defaults.effective_exit_points();
  if (!std::equal(points.begin(), points.end(), ends.begin(), ends.end())) {
    throw_setting_error("exit_policy.kind",
                        kind + " on exit points at the ends of recursions (" + int_list(ends) + ")",
                        "exit points " + int_list(points));
  }
}

void check_capacities(const std::vector<double>& capacities, int recursions) {
  const std::string field = "exit_policy.capacities";
  if (capacities.size() != static_cast<std::size_t>(recursions)) {
    throw_setting_error(
        field, "one capacity per recursion (" + std::to_string(recursions) + ") in top_k mode",
        std::to_string(capacities.size()));
  }
  if (capacities.size() > exit::k_max_quota_points) {
    throw_setting_error(
        field, "at most " + std::to_string(exit::k_max_quota_points) + " recursions in top_k mode",
        std::to_string(capacities.size()));
  }
  for (std::size_t i = 0; i < capacities.size(); ++i) {
    if (!(capacities[i] > 0.0 && capacities[i] <= 1.0))
      throw_setting_error(field, "capacities in (0, 1]", number_text(capacities[i]));
    if (i > 0 && capacities[i] > capacities[i - 1]) {
      throw_setting_error(field,
                          "non-increasing capacities (hierarchical filtering), at most " +
                              number_text(capacities[i - 1]) + " at recursion " +
                              std::to_string(i + 1),
                          number_text(capacities[i]));
    }
  }
  // Every token runs the first recursion (exit points cannot express zero recursions), so a
  // first capacity below 1 could not be realised; MoR's is (N_r - 0) / N_r = 1.
  if (capacities.front() != 1.0) {
    throw_setting_error(field, "capacity 1 at recursion 1 (every token runs it)",
                        number_text(capacities.front()));
  }
}

std::unique_ptr<ExitPolicy> make_router(const ExitPolicyParams& params, const DepthStructure& depth,
                                        std::vector<int> points) {
  check_router_model(params.kind, depth, points);
  if (params.kind == "router_token_choice")
    return std::make_unique<exit::TokenChoiceExit>(std::move(points));
  if (params.router_mode == "top_k") {
    check_capacities(params.capacities, depth.recursions);
    check_finite(params.threshold, "exit_policy.threshold");
    return std::make_unique<exit::ExpertChoiceExit>(std::move(points), params.threshold,
                                                    params.capacities);
  }
  if (params.router_mode != "threshold") {
    throw_setting_error("exit_policy.router_mode", "threshold or top_k",
                        "\"" + params.router_mode + "\"");
  }
  check_finite(params.threshold, "exit_policy.threshold");
  return std::make_unique<exit::ExpertChoiceExit>(std::move(points), params.threshold,
                                                  std::vector<double>{});
}

std::unique_ptr<ExitPolicy> make_confidence(const ExitPolicyParams& params,
                                            std::vector<int> points) {
  check_finite(params.threshold, "exit_policy.threshold");
  if (!parse_confidence_measure(params.confidence_measure)) {
    throw_setting_error("exit_policy.confidence_measure", "top1 or margin",
                        "\"" + params.confidence_measure + "\"");
  }
  if (!(params.calm_decay >= 0.0 && std::isfinite(params.calm_decay)))
    throw_setting_error("exit_policy.calm_decay", "a finite number >= 0",
                        number_text(params.calm_decay));
  return std::make_unique<exit::ConfidenceExit>(std::move(points), params.threshold,
                                                params.calm_decay);
}

std::unique_ptr<ExitPolicy> make_adaptive_threshold(const ExitPolicyParams& params,
                                                    std::vector<int> points) {
  if (!parse_confidence_measure(params.confidence_measure)) {
    throw_setting_error("exit_policy.confidence_measure", "top1 or margin",
                        "\"" + params.confidence_measure + "\"");
  }
  AdaptiveThresholdSettings settings = params.adaptive;
  settings.initial_threshold = params.threshold;
  if (const std::optional<SettingError> error = check_adaptive_settings(settings))
    throw_setting_error(error->key, error->expected, error->found);
  return std::make_unique<exit::AdaptiveThresholdExit>(std::move(points), settings);
}

}  // namespace

std::unique_ptr<ExitPolicy> make_exit_policy(const ExitPolicyParams& params,
                                             const DepthStructure& depth) {
  std::vector<int> points = depth.effective_exit_points();
  const std::string& kind = params.kind;
  if (kind == "none")
    return std::make_unique<exit::NoExit>(std::move(points));
  if (kind == "distribution") {
    check_probabilities(params.probabilities, points.size(), "exit_policy.probabilities");
    check_buckets(params.position_buckets, points.size());
    return std::make_unique<exit::DistributionExit>(std::move(points), params);
  }
  if (kind == "position_schedule") {
    check_schedule(params.schedule, points);
    return std::make_unique<exit::PositionScheduleExit>(std::move(points), params.schedule);
  }
  if (kind == "confidence")
    return make_confidence(params, std::move(points));
  if (kind == "adaptive_threshold")
    return make_adaptive_threshold(params, std::move(points));
  if (kind == "oracle")
    return std::make_unique<exit::OracleExit>(std::move(points));
  if (kind == "router_expert_choice" || kind == "router_token_choice")
    return make_router(params, depth, std::move(points));
  if (kind == "replay") {
    if (!params.replay_lookup)
      throw std::invalid_argument("replay exit policy: no token-trace lookup was supplied");
    return std::make_unique<exit::ReplayExit>(std::move(points), params.replay_lookup);
  }
  std::string names;
  for (const std::string& name : exit_policy_names())
    names += (names.empty() ? "" : ", ") + name;
  throw_setting_error("exit_policy.kind", "one of " + names, "\"" + kind + "\"");
}

}  // namespace exitsim::policy
