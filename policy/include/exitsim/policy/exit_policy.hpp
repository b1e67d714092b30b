#pragma once

// Exit policies: how deep each token of a decode iteration goes. Like the schedulers, each is a
// pure function of its construction-time parameters and of the batch it is handed; randomness
// and model outputs arrive as inputs (per-token uniform draws, confidences, router scores), so
// the engine and the simulator reach the same depths from the same inputs. Semantics and
// examples: docs/exit_policies.md.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "exitsim/core/ids.hpp"
#include "exitsim/core/model_shape.hpp"
#include "exitsim/core/random.hpp"
#include "exitsim/policy/adaptive_threshold.hpp"

namespace exitsim::policy {

// Per sequence: the exits its decode tokens got so far, which router_expert_choice in top_k mode
// needs to realise its capacities over the sequence (docs/exit_policies.md). The executors own one
// per sequence, hand it to the policy in ExitToken::quota and count each token's final exit into
// it with count_exit; the policy only reads it.
struct ExitQuota {
  std::int64_t tokens = 0;            // decode tokens whose exit is counted
  std::vector<std::int64_t> reached;  // reached[p]: those exiting at exit point p or later
};
void count_exit(ExitQuota& quota, int exit_index, std::size_t exit_points);

// One token being generated in this iteration.
struct ExitToken {
  RequestId request;
  std::int64_t position = 0;  // output position, 0 = the first generated token
  double uniform = 0.0;       // a draw on [0, 1): distribution
  // Per exit point (or per recursion, which is the same for a recursive model): confidences
  // (confidence), agreement flags (oracle), router scores (router_*). Unused by none,
  // distribution, position_schedule and replay, which accept an empty span.
  std::span<const double> scores;
  // Its sequence's exits so far: required by router_expert_choice in top_k mode, else unused.
  const ExitQuota* quota = nullptr;
};

struct ExitBatch {
  std::span<const ExitToken> tokens;
  // The position horizon N of CALM's decaying threshold: the largest output position the
  // batch's sequences can reach (the simulator passes the longest output length among them, the
  // engine its generation limit). Values below 1 count as 1.
  std::int64_t max_position = 0;
  // Working space for a policy that ranks the batch, at least tokens.size() entries, so one
  // policy object serves several replicas without allocating. No built-in policy ranks the batch
  // since router_expert_choice's top_k became per sequence (ExitQuota).
  std::span<std::size_t> scratch;
  // The current threshold of adaptive_threshold, which the executor's ThresholdEstimator moves
  // (adaptive_threshold.hpp); that policy requires it, the others ignore it.
  std::optional<double> threshold;
};

class ExitPolicy {
 public:
  virtual ~ExitPolicy() = default;
  virtual std::string_view name() const = 0;
  // Writes, for each token of the batch, the index into exit_points() it exits at. Throws
  // std::invalid_argument when exit_index_out, a token's scores or the scratch are shorter
  // than the policy needs: an executor bug, not a user error.
  virtual void choose_exits(const ExitBatch& batch, std::span<int> exit_index_out) const = 0;
  // Whether choose_exits reads ExitToken::quota: the executors then count every decode token's
  // final exit into its sequence's quota (count_exit).
  virtual bool reads_quota() const { return false; }

  // The model's effective exit points (depths), ascending; the last is the full depth.
  std::span<const int> exit_points() const { return exit_points_; }
  int last_exit() const { return static_cast<int>(exit_points_.size()) - 1; }
  // Non-null for a policy whose threshold moves during the run (adaptive_threshold): the
  // settings the executor builds its ThresholdEstimator from.
  virtual const AdaptiveThresholdSettings* adaptive_settings() const { return nullptr; }

 protected:
  explicit ExitPolicy(std::vector<int> exit_points) : exit_points_(std::move(exit_points)) {}

 private:
  std::vector<int> exit_points_;
};

struct ExitPositionBucket {
  std::int64_t until_position = 0;  // applies to output positions below this
  std::vector<double> probabilities;
};

struct ExitScheduleStep {
  std::int64_t from_position = 0;
  int depth = 0;  // executed layers before the coda; mapped up to the nearest exit point
};

// The token trace behind `replay`: the exit point index a token of the trace exited at, or
// nullopt when the trace has no such token.
using ExitLookup = std::function<std::optional<int>(RequestId request, std::int64_t position)>;

// Mirrors the scenario's exit_policy section (the simulator copies the fields over), plus the
// trace lookup that replay needs.
struct ExitPolicyParams {
  std::string kind = "none";
  double threshold = 0.9;
  std::string confidence_measure = "top1";  // top1 | margin
  double calm_decay = 0.0;
  std::string router_mode = "threshold";  // threshold | top_k
  std::vector<double> capacities;
  std::vector<double> probabilities;
  std::vector<ExitPositionBucket> position_buckets;
  std::vector<ExitScheduleStep> schedule;
  // adaptive_threshold: the estimator's settings; its initial threshold is `threshold`.
  AdaptiveThresholdSettings adaptive;
  ExitLookup replay_lookup;
};

// Validates the parameters against the model's depth structure and builds the policy. Throws
// InputError whose field is the scenario key at fault ("exit_policy.probabilities", ...), and
// std::invalid_argument for replay without a lookup.
std::unique_ptr<ExitPolicy> make_exit_policy(const ExitPolicyParams& params,
                                             const DepthStructure& depth);

// none, confidence, adaptive_threshold, router_expert_choice, router_token_choice, oracle,
// position_schedule, replay, distribution.
std::vector<std::string> exit_policy_names();

// CALM's decaying threshold (FREE's implementation of the CALM baseline):
// lambda * exp(-tau * t / n) / 10 + 0.9 * lambda; exactly lambda when tau is 0. It starts at
// lambda and falls towards 0.9 * lambda as the position t approaches the horizon n (>= 1).
double calm_threshold(double lambda, double tau, std::int64_t t, std::int64_t n);

// The uniform a token's exit is drawn from (ExitToken::uniform): a pure function of the run's
// seed and the token (request, output position) and `draw` (0 for the exit itself; other draws
// of the same token use their own index), so the engine and the simulator give a token the same
// exit, whatever else is in its batch and whatever the strategy, scheduler or batch limit.
double exit_uniform(std::uint64_t seed, RequestId request, std::int64_t position, int draw = 0);
// The stream exit_uniform draws from: exit_draws(seed)(request, position, draw) is
// exit_uniform(seed, request, position, draw), and its fill() gives a token's draws at once.
KeyedUniform exit_draws(std::uint64_t seed);

enum class ConfidenceMeasure : std::uint8_t { top1, margin };
std::optional<ConfidenceMeasure> parse_confidence_measure(std::string_view name);

// A token's confidence at an exit point from the softmax over the vocabulary there: the top-1
// probability, or the top-1 minus the top-2 probability (FREE). Allocation-free, one pass.
double exit_confidence(std::span<const float> probabilities, ConfidenceMeasure measure);

}  // namespace exitsim::policy
