#pragma once

// The quality table: what `exitsim engine eval` measured for each exit setting it ran on an
// evaluation text (loss, agreement with the full-depth prediction, depth, exit distribution).
// Pareto reports read all of it; the simulator reads the exit distributions of its `confidence`
// rows (ExitTable). It lives here rather than in the engine because the simulator reads it and
// the policy library does not depend on the engine. Format (docs/exit_policies.md):
//
//   # exitsim-quality-table v1
//   policy,measure,threshold,capacities,tokens,nll_per_token,top1_agreement,mean_exit_depth,
//     p_exit_1,p_exit_2,p_exit_3              (one line in the file)
//   full_depth,,,,40000,1.2345,1,31,0,0,1
//   confidence,top1,0.9,,40000,1.25,0.9997,26,0.2,0.3,0.5
//   router_expert_choice,,,1;0.67;0.33,40000,1.4,0.93,21,0.33,0.34,0.33

#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace exitsim::policy {

inline constexpr std::string_view k_quality_table_version_line = "# exitsim-quality-table v1";
// The policy name of the reference row: every token at the last exit point.
inline constexpr std::string_view k_full_depth_policy = "full_depth";

// One exit setting and what it measured.
struct QualityRow {
  std::string policy;   // full_depth, or an exit policy kind (exit_policy_names())
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
    "policy", "measure",       "threshold",      "capacities",
    "tokens", "nll_per_token", "top1_agreement", "mean_exit_depth"};

}  // namespace exitsim::policy
