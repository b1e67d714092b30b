// Policies that read per-exit-point scores: confidence (CALM/FREE), adaptive_threshold (FREE),
// oracle (RRT's analysis) and the Mixture-of-Recursions token-choice router.

#include <cmath>
#include <limits>
#include <stdexcept>

#include "exit/exit_policies.hpp"

namespace exitsim::policy::exit {

ConfidenceExit::ConfidenceExit(std::vector<int> exit_points, double threshold, double calm_decay)
    : ExitPolicy(std::move(exit_points)), threshold_(threshold), calm_decay_(calm_decay) {}

void ConfidenceExit::choose_exits(const ExitBatch& batch, std::span<int> out) const {
  check_output_size(batch, out);
  const std::size_t points = exit_points().size();
  for (std::size_t i = 0; i < batch.tokens.size(); ++i) {
    const ExitToken& token = batch.tokens[i];
    check_scores(token, points - 1, name());
    const double threshold =
        calm_threshold(threshold_, calm_decay_, token.position, batch.max_position);
    out[i] = first_confident_exit(token.scores, threshold, last_exit());
  }
}

int first_confident_exit(std::span<const double> confidences, double threshold, int last_exit) {
  // The last exit point is the full depth: a token that never reaches the threshold runs it.
  for (int p = 0; p < last_exit; ++p) {
    if (confidences[static_cast<std::size_t>(p)] >= threshold)
      return p;
  }
  return last_exit;
}

void AdaptiveThresholdExit::choose_exits(const ExitBatch& batch, std::span<int> out) const {
  check_output_size(batch, out);
  if (!batch.threshold)
    throw std::invalid_argument("adaptive_threshold: the executor passed no current threshold");
  const std::size_t points = exit_points().size();
  for (std::size_t i = 0; i < batch.tokens.size(); ++i) {
    const ExitToken& token = batch.tokens[i];
    check_scores(token, points - 1, name());
    out[i] = first_confident_exit(token.scores, *batch.threshold, last_exit());
  }
}

void OracleExit::choose_exits(const ExitBatch& batch, std::span<int> out) const {
  check_output_size(batch, out);
  const std::size_t points = exit_points().size();
  for (std::size_t i = 0; i < batch.tokens.size(); ++i) {
    const ExitToken& token = batch.tokens[i];
    check_scores(token, points - 1, name());
    int exit = last_exit();
    for (std::size_t p = 0; p + 1 < points; ++p) {
      // Flags are 1 (this exit point's argmax equals the full-depth argmax) or 0.
      if (token.scores[p] > 0.5) {
        exit = static_cast<int>(p);
        break;
      }
    }
    out[i] = exit;
  }
}

void TokenChoiceExit::choose_exits(const ExitBatch& batch, std::span<int> out) const {
  check_output_size(batch, out);
  const std::size_t points = exit_points().size();
  for (std::size_t i = 0; i < batch.tokens.size(); ++i) {
    const ExitToken& token = batch.tokens[i];
    check_scores(token, points, name());
    // Argmax over the recursion "experts"; strict comparison keeps the shallower on ties, and
    // NaN never wins.
    std::size_t best = 0;
    double best_score = -std::numeric_limits<double>::infinity();
    for (std::size_t p = 0; p < points; ++p) {
      if (token.scores[p] > best_score) {
        best = p;
        best_score = token.scores[p];
      }
    }
    out[i] = static_cast<int>(best);
  }
}

}  // namespace exitsim::policy::exit
