#include "exitsim/engine/quality_table.hpp"

#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

namespace exitsim::engine {
namespace {

// The columns that name a row's setting, with its policy's order of first appearance: what the
// rows are ordered by.
using SettingKey =
    std::tuple<std::size_t, std::string, std::string, bool, double, std::vector<double>>;

SettingKey setting_key(const QualityRow& row, std::size_t group) {
  return {group,
          row.strategy,
          row.measure,
          row.threshold.has_value(),
          row.threshold.value_or(0.0),
          row.capacities};
}

}  // namespace

QualityRow quality_row_of(const QualityMeasurement& measurement) {
  const policy::ExitPolicyParams& params = measurement.exit_policy;
  QualityRow row;
  row.policy = params.kind == "none" ? std::string(policy::k_full_depth_policy) : params.kind;
  row.strategy =
      params.kind == "none" ? "full_depth" : std::string(to_string(measurement.strategy));
  // adaptive_threshold's setting is its initial threshold (where it ended: QualityMeasurement).
  if (params.kind == "confidence" || params.kind == "adaptive_threshold") {
    row.measure = params.confidence_measure;
    row.threshold = params.threshold;
  } else if (params.kind == "router_expert_choice") {
    if (params.router_mode == "top_k")
      row.capacities = params.capacities;
    else
      row.threshold = params.threshold;
  }
  row.tokens = measurement.tokens;
  row.nll_per_token = measurement.nll_per_token;
  row.top1_agreement = measurement.top1_agreement;
  row.mean_exit_depth = measurement.mean_exit_depth;
  row.p_exit = measurement.exit_distribution;
  return row;
}

QualityTable quality_table_of(std::span<const QualityMeasurement> measurements) {
  std::vector<QualityRow> rows;
  std::vector<SettingKey> keys;
  std::vector<std::string> policies;  // in order of first appearance
  for (const QualityMeasurement& m : measurements) {
    QualityRow row = quality_row_of(m);
    const auto found = std::find(policies.begin(), policies.end(), row.policy);
    keys.push_back(setting_key(row, static_cast<std::size_t>(found - policies.begin())));
    if (found == policies.end())
      policies.push_back(row.policy);
    rows.push_back(std::move(row));
  }
  std::vector<std::size_t> order(rows.size());
  for (std::size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return keys[a] < keys[b]; });
  std::vector<QualityRow> sorted;
  for (std::size_t k = 0; k < order.size(); ++k) {
    // Only an exact repeat is dropped: the same setting measured differently (a parameter
    // without a column, such as calm_decay) is left for the table to reject.
    if (k > 0 && keys[order[k]] == keys[order[k - 1]] && rows[order[k]] == sorted.back())
      continue;
    sorted.push_back(rows[order[k]]);
  }
  return QualityTable(std::move(sorted), "<engine eval>");
}

}  // namespace exitsim::engine
