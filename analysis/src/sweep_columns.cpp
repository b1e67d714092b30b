#include "exitsim/analysis/sweep_columns.hpp"

namespace exitsim::analysis {

const RunMetricColumn* find_run_metric(std::string_view name) {
  for (const RunMetricColumn& column : k_run_metric_columns) {
    if (column.name == name)
      return &column;
  }
  return nullptr;
}

RunSetting run_setting_of(const scenario::Scenario& scenario) {
  const scenario::ExitPolicyConfig& exit = scenario.exit_policy;
  RunSetting s;
  s.policy = exit.kind;
  // The keys apply as the schema says (scenarios/src/schema_policy.cpp): a threshold for
  // confidence and router_expert_choice, a measure for confidence, capacities for expert choice,
  // where top_k mode keeps them instead of a threshold; adaptive_threshold is keyed like
  // confidence by its measure and the threshold it starts from.
  const bool confidence = exit.kind == "confidence" || exit.kind == "adaptive_threshold";
  if (confidence || exit.kind == "router_expert_choice")
    s.threshold = exit.threshold;
  if (confidence)
    s.measure = exit.confidence_measure;
  if (exit.kind == "router_expert_choice" && exit.router_mode == "top_k") {
    s.capacities = exit.capacities;
    s.threshold.reset();
  }
  s.strategy = scenario.sync.strategy;
  s.max_running = static_cast<double>(scenario.scheduler.max_running);
  return s;
}

}  // namespace exitsim::analysis
