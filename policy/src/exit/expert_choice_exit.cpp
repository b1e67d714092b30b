// The Mixture-of-Recursions expert-choice router at decode time. scores[r] is the router's score
// for the token at recursion r (0-based); being selected at r means running recursion r. Only
// tokens selected at r are candidates at r + 1 (hierarchical filtering), and a token exits at
// the end of the last recursion it was selected for. Exit points cannot express zero
// recursions, so a token dropped already at the first recursion exits at index 0.

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "exit/exit_policies.hpp"

namespace exitsim::policy {

void count_exit(ExitQuota& quota, int exit_index, std::size_t exit_points) {
  if (exit_index < 0 || static_cast<std::size_t>(exit_index) >= exit_points) {
    throw std::invalid_argument("count_exit: exit index " + std::to_string(exit_index) +
                                " outside the " + std::to_string(exit_points) + " exit points");
  }
  quota.reached.resize(exit_points, 0);
  quota.tokens += 1;
  for (int p = 0; p <= exit_index; ++p)
    quota.reached[static_cast<std::size_t>(p)] += 1;
}

namespace exit {
namespace {

// How far the sequence's exit counts stray from its capacities if this token exits at `exit`:
// the largest |count - share x n| over every range [a, b) of exit points, where the range's count
// is the tokens exiting in it (this one included), its share capacities[a] - capacities[b]
// (capacities past the last recursion are 0) and n the sequence's decode tokens so far.
double quota_deviation(std::span<const double> capacities, std::span<const std::int64_t> reached,
                       std::int64_t n, int exit) {
  const std::size_t boundaries = capacities.size() + 1;
  const auto count_from = [&](std::size_t p) -> double {
    if (p >= capacities.size())
      return 0.0;
    const std::int64_t before = p < reached.size() ? reached[p] : 0;
    return static_cast<double>(before + (static_cast<std::size_t>(exit) >= p ? 1 : 0));
  };
  const auto capacity = [&](std::size_t p) { return p < capacities.size() ? capacities[p] : 0.0; };
  double worst = 0.0;
  for (std::size_t a = 0; a < boundaries; ++a) {
    for (std::size_t b = a + 1; b < boundaries; ++b) {
      const double count = count_from(a) - count_from(b);
      const double share = (capacity(a) - capacity(b)) * static_cast<double>(n);
      worst = std::max(worst, std::abs(count - share));
    }
  }
  return worst;
}

}  // namespace

ExpertChoiceExit::ExpertChoiceExit(std::vector<int> exit_points, double threshold,
                                   std::vector<double> capacities)
    : ExitPolicy(std::move(exit_points)),
      threshold_(threshold),
      capacities_(std::move(capacities)) {}

void ExpertChoiceExit::choose_exits(const ExitBatch& batch, std::span<int> out) const {
  check_output_size(batch, out);
  for (const ExitToken& token : batch.tokens)
    check_scores(token, exit_points().size(), name());
  for (std::size_t i = 0; i < batch.tokens.size(); ++i)
    out[i] = capacities_.empty() ? by_threshold(batch.tokens[i]) : by_quota(batch.tokens[i]);
}

int ExpertChoiceExit::by_threshold(const ExitToken& token) const {
  // Per token, independent of the batch: MoR's auxiliary loss drives selected scores towards 1
  // and the rest towards 0, so a fixed threshold stands in for the non-causal top-k at decode.
  const std::size_t recursions = exit_points().size();
  int exit = 0;
  for (std::size_t r = 0; r < recursions && token.scores[r] >= threshold_; ++r)
    exit = static_cast<int>(r);
  return exit;
}

int ExpertChoiceExit::by_quota(const ExitToken& token) const {
  // MoR's capacities are fractions of a sequence's tokens, so they are realised over the
  // sequence: the token's exit keeps every range of exit points within one token of its share
  // of the sequence's decode tokens (quota_deviation below 1), and inside that slack the router
  // decides, recursion by recursion, as the threshold mode does. Deciding at recursion r reads
  // scores up to r only, so an executor that routes one recursion at a time (the engine) reaches
  // the same exit as one that knows every score at once (the simulator).
  if (token.quota == nullptr)
    throw std::invalid_argument("router_expert_choice in top_k mode needs each token's quota");
  const ExitQuota& quota = *token.quota;
  const std::int64_t n = quota.tokens + 1;
  const int points = static_cast<int>(exit_points().size());
  // Exits that keep the counts within one token; when none can (some capacities with more than
  // three recursions, docs/exit_policies.md), those that stray least.
  std::array<double, k_max_quota_points> deviation{};
  double least = std::numeric_limits<double>::infinity();
  for (int e = 0; e < points; ++e) {
    deviation[static_cast<std::size_t>(e)] = quota_deviation(capacities_, quota.reached, n, e);
    least = std::min(least, deviation[static_cast<std::size_t>(e)]);
  }
  const double allowed = least < 1.0 - 1e-9 ? 1.0 - 1e-9 : least + 1e-12;
  const auto admissible = [&](int e) { return deviation[static_cast<std::size_t>(e)] < allowed; };
  const auto admissible_from = [&](int first) {
    for (int e = first; e < points; ++e) {
      if (admissible(e))
        return true;
    }
    return false;
  };
  // Recursion 0 always runs (capacities[0] is 1). At recursion r the token goes on when an exit
  // at r or deeper is admissible and either stopping is not or its score reaches the threshold;
  // an admissible exit stays ahead at every step, so the walk ends on one.
  int exit = 0;
  for (int r = 1; r < points; ++r) {
    const bool may_stop = admissible(r - 1);
    const bool may_go = admissible_from(r);
    if (!may_go || (may_stop && !(token.scores[static_cast<std::size_t>(r)] >= threshold_)))
      break;
    exit = r;
  }
  return exit;
}

}  // namespace exit
}  // namespace exitsim::policy
