#pragma once

// The quality table: what `exitsim engine eval` measured for each exit setting it ran on an
// evaluation text (loss, agreement with the full-depth prediction, depth, exit distribution).
// Pareto reports read all of it; the simulator reads the exit distributions of its `confidence`
// rows (ExitTable). It lives here rather than in the engine because the simulator reads it and
// the policy library does not depend on the engine. Format (docs/exit_policies.md):
//
//   # exitsim-quality-table v2
//   policy,strategy,measure,threshold,capacities,tokens,nll_per_token,top1_agreement,
//     mean_exit_depth,p_exit_1,p_exit_2,p_exit_3              (one line in the file)
//   full_depth,full_depth,,,,40000,1.2345,1,31,0,0,1
//   confidence,skip_kv,top1,0.9,,40000,1.25,0.9997,26,0.2,0.3,0.5
//   confidence,state_copy,top1,0.9,,40000,1.24,0.9998,26,0.2,0.3,0.5
//   router_expert_choice,skip_kv,,,1;0.67;0.33,40000,1.4,0.93,21,0.33,0.34,0.33
//
// Quality depends on the synchronization strategy (the K/V later tokens attend over differs), so
// every row names the strategy it was measured under, and a setting is looked up by policy,
// strategy and setting together (QualitySetting).

#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace exitsim::policy {

inline constexpr std::string_view k_quality_table_version_line = "# exitsim-quality-table v2";
// The policy name of the reference row: every token at the last exit point.
inline constexpr std::string_view k_full_depth_policy = "full_depth";

// One exit setting and what it measured.
struct QualityRow {
  std::string policy;  // full_depth, or an exit policy kind (exit_policy_names())
  // The synchronization strategy it was measured under: full_depth for the full_depth row, a
  // strategy that lets tokens exit for the others.
  std::string strategy;
  std::string measure;  // confidence rows: "top1" or "margin"; empty otherwise
  // The setting, at most one of the two: the confidence threshold or router score threshold,
  // or the per-recursion capacities of router_mode top_k.
  std::optional<double> threshold;
  std::vector<double> capacities;
  std::int64_t tokens = 0;     // evaluated tokens, >= 1
  double nll_per_token = 0.0;  // nats, >= 0
  // The fraction of tokens whose prediction at their exit has the full-depth prediction's argmax.
  double top1_agreement = 0.0;
  double mean_exit_depth = 0.0;  // stack layers run before the coda, >= 0
  std::vector<double> p_exit;    // per exit point: the fraction of tokens exiting there

  friend bool operator==(const QualityRow&, const QualityRow&) = default;
};

class QualityTable {
 public:
  // At least one row, every row valid under the rules the reader applies (docs/exit_policies.md),
  // all with the same number (>= 1) of exit probabilities. Throws std::invalid_argument
  // otherwise, so what write() writes always reads back. `source` names the table in errors.
  explicit QualityTable(std::vector<QualityRow> rows, std::string source = "<quality table>");

  // Strict readers: any malformed content throws InputError naming the file, line, column and
  // field (version, header, row, or the column's name) with an "expected X, found Y" message.
  static QualityTable read(const std::string& path);
  static QualityTable parse(std::istream& in, const std::string& name);

  // Writes the format above; numbers in their shortest exact form, so parse() reads back an
  // equal table.
  void write(std::ostream& out) const;

  std::size_t exit_points() const { return rows_.front().p_exit.size(); }
  const std::vector<QualityRow>& rows() const { return rows_; }
  const std::string& source() const { return source_; }

  friend bool operator==(const QualityTable& a, const QualityTable& b) {
    return a.rows_ == b.rows_;
  }

 private:
  std::vector<QualityRow> rows_;
  std::string source_;
};

// The header's columns before p_exit_1.
inline constexpr std::string_view k_quality_table_columns[] = {
    "policy", "strategy",      "measure",        "threshold",      "capacities",
    "tokens", "nll_per_token", "top1_agreement", "mean_exit_depth"};

// What identifies a row: the exit setting and the strategy it ran under. The one definition of
// the join between what was simulated and what was measured (the report, the simulator).
struct QualitySetting {
  std::string policy;  // full_depth, or an exit policy kind
  std::string strategy;
  std::string measure;  // confidence and adaptive_threshold only
  std::optional<double> threshold;
  std::vector<double> capacities;

  // Runs and rows with strategy full_depth are the full-depth reference, whatever exit setting
  // they were given: every token runs every layer.
  static QualitySetting of(const QualityRow& row);
  friend bool operator==(const QualitySetting&, const QualitySetting&) = default;
};

// The full-depth reference setting.
QualitySetting full_depth_setting();
// `setting` with the no-ops removed: strategy full_depth (or exit policy none) is the full-depth
// reference whatever the rest says.
QualitySetting canonical(QualitySetting setting);

// The row measured for `setting` (thresholds equal within 1e-9), or null: never a row of another
// strategy.
const QualityRow* find_quality_row(const QualityTable& table, const QualitySetting& setting);

}  // namespace exitsim::policy
