// The Mixture-of-Recursions expert-choice router at decode time. scores[r] is the router's score
// for the token at recursion r (0-based); being selected at r means running recursion r. Only
// tokens selected at r are candidates at r + 1 (hierarchical filtering), and a token exits at
// the end of the last recursion it was selected for. Exit points cannot express zero
// recursions, so a token dropped already at the first recursion exits at index 0.

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>

#include "exit/exit_policies.hpp"

namespace exitsim::policy::exit {
namespace {

double rank_key(double score) {
  return std::isnan(score) ? -std::numeric_limits<double>::infinity() : score;
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
  if (capacities_.empty()) {
    by_threshold(batch, out);
  } else {
    by_top_k(batch, out);
  }
}

void ExpertChoiceExit::by_threshold(const ExitBatch& batch, std::span<int> out) const {
  // Per token, independent of the batch: MoR's auxiliary loss drives selected scores towards 1
  // and the rest towards 0, so a fixed threshold stands in for the non-causal top-k at decode.
  const std::size_t recursions = exit_points().size();
  for (std::size_t i = 0; i < batch.tokens.size(); ++i) {
    const std::span<const double> scores = batch.tokens[i].scores;
    int exit = 0;
    for (std::size_t r = 0; r < recursions && scores[r] >= threshold_; ++r)
      exit = static_cast<int>(r);
    out[i] = exit;
  }
}

void ExpertChoiceExit::by_top_k(const ExitBatch& batch, std::span<int> out) const {
  // Top-k across the batch at each recursion, k = ceil(capacity_r * batch size) as in MoR, where
  // the capacity is a fraction of all tokens (MoR's capacity x sequence length), not of the
  // candidates left: capacities {1, 2/3, 1/3} leave a third of the batch at each depth. Ties
  // go to the earlier token in the batch, so the selection is deterministic.
  const std::size_t n = batch.tokens.size();
  if (batch.scratch.size() < n) {
    throw std::invalid_argument("router_expert_choice exit policy needs " + std::to_string(n) +
                                " scratch entries, got " + std::to_string(batch.scratch.size()));
  }
  const std::span<std::size_t> active = batch.scratch.first(n);
  std::iota(active.begin(), active.end(), std::size_t{0});
  std::fill(out.begin(), out.end(), 0);
  std::size_t candidates = n;
  for (std::size_t r = 0; r < capacities_.size() && candidates > 0; ++r) {
    // The small tolerance keeps 0.7 * 10 = 7.000000000000001 from rounding up to 8.
    const double quota = std::ceil(capacities_[r] * static_cast<double>(n) - 1e-9);
    const std::size_t k =
        std::min(candidates, std::max<std::size_t>(1, static_cast<std::size_t>(quota)));
    if (k < candidates) {
      const auto ranks_higher = [&](std::size_t a, std::size_t b) {
        const double sa = rank_key(batch.tokens[a].scores[r]);
        const double sb = rank_key(batch.tokens[b].scores[r]);
        return sa != sb ? sa > sb : a < b;
      };
      const auto first = active.begin();
      std::nth_element(first, first + static_cast<std::ptrdiff_t>(k),
                       first + static_cast<std::ptrdiff_t>(candidates), ranks_higher);
      candidates = k;
    }
    for (std::size_t j = 0; j < candidates; ++j)
      out[active[j]] = static_cast<int>(r);
  }
}

}  // namespace exitsim::policy::exit
