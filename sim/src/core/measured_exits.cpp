#include "measured_exits.hpp"

#include <fmt/format.h>

#include <cmath>
#include <string>

#include "exitsim/core/error.hpp"
#include "exitsim/policy/exit_table.hpp"
#include "exitsim/policy/quality_table.hpp"
#include "exitsim/sim/inputs/shared_inputs.hpp"

namespace exitsim::sim {
namespace {

bool is_router(const std::string& kind) {
  return kind == "router_expert_choice" || kind == "router_token_choice";
}

void check_points(std::size_t found, const std::string& table, const DepthStructure& depth) {
  const std::size_t points = depth.effective_exit_points().size();
  if (found != points) {
    throw InputError(
        {table, 0, 0, "exit_policy.threshold_table"},
        expected_found(fmt::format("{} exit points (the model's)", points), std::to_string(found)));
  }
}

std::vector<double> confidence_distribution(const scenario::ExitPolicyConfig& config,
                                            const std::string& strategy,
                                            const DepthStructure& depth) {
  const std::shared_ptr<const policy::ExitTable> shared =
      shared_exit_table(config.threshold_table, strategy);
  const policy::ExitTable& table = *shared;
  check_points(table.exit_points(), config.threshold_table, depth);
  // A quality table says which confidence it thresholded; a table of another measure would give
  // the wrong exit distribution silently.
  if (!table.measure().empty() && table.measure() != config.confidence_measure) {
    throw InputError({config.threshold_table, 0, 0, "exit_policy.confidence_measure"},
                     expected_found(fmt::format("the table's measure \"{}\"", table.measure()),
                                    "\"" + config.confidence_measure + "\""));
  }
  return table.exit_distribution_for(config.threshold);
}

bool same_capacities(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size())
    return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::abs(a[i] - b[i]) > 1e-9)
      return false;
  }
  return true;
}

std::vector<double> measured_row(const scenario::ExitPolicyConfig& config,
                                 const std::string& strategy, const DepthStructure& depth) {
  const std::shared_ptr<const policy::QualityTable> shared =
      shared_quality_table(config.threshold_table);
  const policy::QualityTable& table = *shared;
  check_points(table.exit_points(), config.threshold_table, depth);
  const bool thresholded = config.kind == "router_expert_choice" && config.router_mode != "top_k";
  std::vector<double> thresholds;
  std::vector<std::vector<double>> distributions;
  std::string settings;
  for (const policy::QualityRow& row : table.rows()) {
    if (row.policy != config.kind || row.strategy != strategy)
      continue;
    if (thresholded && row.threshold) {
      thresholds.push_back(*row.threshold);
      distributions.push_back(row.p_exit);
    } else if (!thresholded && !row.threshold &&
               (config.kind != "router_expert_choice" ||
                same_capacities(row.capacities, config.capacities))) {
      return row.p_exit;
    }
    settings += settings.empty() ? "" : ", ";  // what the table has for this policy and strategy
    settings += row.threshold ? fmt::format("threshold {}", *row.threshold)
                              : fmt::format("capacities [{}]", fmt::join(row.capacities, ", "));
  }
  if (thresholded && !thresholds.empty()) {
    const policy::ExitTable rows(std::move(thresholds), std::move(distributions),
                                 config.threshold_table);
    return rows.exit_distribution_for(config.threshold);
  }
  const std::string wanted = config.kind == "router_expert_choice"
                                 ? (thresholded ? "rows with a threshold"
                                                : fmt::format("a row of capacities [{}]",
                                                              fmt::join(config.capacities, ", ")))
                                 : "a row";
  throw InputError({config.threshold_table, 0, 0, "policy"},
                   expected_found(fmt::format("{} of exit policy {} under {} (measured by "
                                              "`exitsim engine eval --strategies {}`)",
                                              wanted, config.kind, strategy, strategy),
                                  settings.empty() ? "none" : settings));
}

}  // namespace

bool uses_measured_exits(const scenario::ExitPolicyConfig& config) {
  return config.kind == "confidence" || config.kind == "oracle" ||
         (is_router(config.kind) && config.router_scores != "uniform");
}

std::vector<double> measured_exit_distribution(const scenario::ExitPolicyConfig& config,
                                               const std::string& strategy,
                                               const DepthStructure& depth) {
  if (config.threshold_table.empty()) {
    throw InputError(
        {"", 0, 0, "exit_policy.threshold_table"},
        fmt::format("exit policy {} decides from the model's outputs: the simulator needs the exit "
                    "distribution the engine measured (the quality table of `exitsim engine "
                    "eval`){}",
                    config.kind,
                    is_router(config.kind)
                        ? ", or exit_policy.router_scores: uniform for synthetic router scores"
                        : ""));
  }
  if (config.calm_decay != 0.0) {
    throw InputError({"", 0, 0, "exit_policy.calm_decay"},
                     expected_found("0 when simulating from a measured table (its exit "
                                    "distributions were measured at a constant threshold)",
                                    fmt::format("{}", config.calm_decay)));
  }
  if (config.kind == "confidence")
    return confidence_distribution(config, strategy, depth);
  return measured_row(config, strategy, depth);
}

}  // namespace exitsim::sim
