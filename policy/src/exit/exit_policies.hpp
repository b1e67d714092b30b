#pragma once

// The built-in exit policies. make_exit_policy() validates their parameters; the constructors
// assume valid ones.

#include <algorithm>
#include <string>
#include <vector>

#include "exitsim/policy/exit_policy.hpp"

namespace exitsim::policy::exit {

// The shortest text that reads back to the same double ("0.9", not "0.900000").
std::string number_text(double value);

// Precondition checks shared by the policies; each throws std::invalid_argument.
void check_output_size(const ExitBatch& batch, std::span<const int> out);
void check_scores(const ExitToken& token, std::size_t needed, std::string_view policy);

// The first exit point below the full depth whose confidence reaches `threshold`, else the
// last exit point (confidence and adaptive_threshold).
int first_confident_exit(std::span<const double> confidences, double threshold, int last_exit);

// A categorical distribution over exit points sampled by inverse CDF.
class ExitSampler {
 public:
  explicit ExitSampler(const std::vector<double>& probabilities);
  // The first exit point whose cumulative probability exceeds `uniform`; never one of
  // probability 0, whatever rounding did to the last cumulative sum.
  int sample(double uniform) const;

 private:
  std::vector<double> cumulative_;
  int last_positive_ = 0;
};

// Inline: called once per token.
inline int ExitSampler::sample(double uniform) const {
  // Negative draws would otherwise pick a leading exit point of probability 0 (its cumulative
  // sum, 0, exceeds them); a draw at or past the rounded total falls to the last possible one.
  const double u = std::max(uniform, 0.0);
  // The cumulative sums ascend, so the first one above u is at the count of those not above it
  // (what upper_bound finds). Counted without branches: the draws are random, and a search over
  // a handful of exit points mispredicts about once per token.
  std::size_t index = 0;
  for (const double c : cumulative_)
    index += !(u < c) ? 1 : 0;
  if (index == cumulative_.size())
    return last_positive_;
  return static_cast<int>(index);
}

class NoExit final : public ExitPolicy {
 public:
  explicit NoExit(std::vector<int> exit_points) : ExitPolicy(std::move(exit_points)) {}
  std::string_view name() const override { return "none"; }
  void choose_exits(const ExitBatch& batch, std::span<int> out) const override;
};

class DistributionExit final : public ExitPolicy {
 public:
  DistributionExit(std::vector<int> exit_points, const ExitPolicyParams& params);
  std::string_view name() const override { return "distribution"; }
  void choose_exits(const ExitBatch& batch, std::span<int> out) const override;

 private:
  std::vector<std::int64_t> until_positions_;  // ascending, one per bucket
  std::vector<ExitSampler> buckets_;           // the buckets', then the top-level sampler
};

class PositionScheduleExit final : public ExitPolicy {
 public:
  PositionScheduleExit(std::vector<int> exit_points, const std::vector<ExitScheduleStep>& steps);
  std::string_view name() const override { return "position_schedule"; }
  void choose_exits(const ExitBatch& batch, std::span<int> out) const override;

 private:
  std::vector<std::int64_t> from_positions_;  // ascending, the first is 0
  std::vector<int> step_exits_;               // exit index of each step
};

class ConfidenceExit final : public ExitPolicy {
 public:
  ConfidenceExit(std::vector<int> exit_points, double threshold, double calm_decay);
  std::string_view name() const override { return "confidence"; }
  void choose_exits(const ExitBatch& batch, std::span<int> out) const override;

 private:
  double threshold_;
  double calm_decay_;
};

// FREE: the confidence rule of ConfidenceExit (no CALM decay) at the threshold the executor's
// estimator has reached, ExitBatch::threshold.
class AdaptiveThresholdExit final : public ExitPolicy {
 public:
  AdaptiveThresholdExit(std::vector<int> exit_points, const AdaptiveThresholdSettings& settings)
      : ExitPolicy(std::move(exit_points)), settings_(settings) {}
  std::string_view name() const override { return "adaptive_threshold"; }
  void choose_exits(const ExitBatch& batch, std::span<int> out) const override;
  const AdaptiveThresholdSettings* adaptive_settings() const override { return &settings_; }

 private:
  AdaptiveThresholdSettings settings_;
};

class OracleExit final : public ExitPolicy {
 public:
  explicit OracleExit(std::vector<int> exit_points) : ExitPolicy(std::move(exit_points)) {}
  std::string_view name() const override { return "oracle"; }
  void choose_exits(const ExitBatch& batch, std::span<int> out) const override;
};

class TokenChoiceExit final : public ExitPolicy {
 public:
  explicit TokenChoiceExit(std::vector<int> exit_points) : ExitPolicy(std::move(exit_points)) {}
  std::string_view name() const override { return "router_token_choice"; }
  void choose_exits(const ExitBatch& batch, std::span<int> out) const override;
};

// The most recursions router_expert_choice in top_k mode takes (make_exit_policy checks it): its
// per-token work space is a fixed array.
inline constexpr std::size_t k_max_quota_points = 16;

class ExpertChoiceExit final : public ExitPolicy {
 public:
  // Top-k mode, capacities realised over each sequence, when `capacities` is non-empty (one per
  // recursion, the first 1); threshold mode otherwise.
  ExpertChoiceExit(std::vector<int> exit_points, double threshold, std::vector<double> capacities);
  std::string_view name() const override { return "router_expert_choice"; }
  void choose_exits(const ExitBatch& batch, std::span<int> out) const override;
  bool reads_quota() const override { return !capacities_.empty(); }

 private:
  int by_threshold(const ExitToken& token) const;
  int by_quota(const ExitToken& token) const;

  double threshold_;
  std::vector<double> capacities_;
};

class ReplayExit final : public ExitPolicy {
 public:
  ReplayExit(std::vector<int> exit_points, ExitLookup lookup);
  std::string_view name() const override { return "replay"; }
  void choose_exits(const ExitBatch& batch, std::span<int> out) const override;

 private:
  ExitLookup lookup_;
};

}  // namespace exitsim::policy::exit
