// make_exit_policy rejects parameters that do not fit the model with one line naming the
// scenario key.

#include <gtest/gtest.h>

#include <functional>

#include "exitsim/core/error.hpp"
#include "exitsim/core/presets.hpp"
#include "exitsim/policy/exit_policy.hpp"

namespace exitsim::policy {
namespace {

struct Case {
  const char* name;
  std::function<void(ExitPolicyParams&, DepthStructure&)> edit;
  const char* message;
};

ExitPolicyParams with_kind(const char* kind) {
  ExitPolicyParams p;
  p.kind = kind;
  return p;
}

class ExitValidation : public testing::TestWithParam<Case> {};

TEST_P(ExitValidation, RejectsWithOneLine) {
  ExitPolicyParams params;
  DepthStructure depth = DepthStructure::middle_cycle(32, 3);  // exit points 11, 21, 31
  GetParam().edit(params, depth);
  try {
    make_exit_policy(params, depth);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), GetParam().message);
  }
}

void distribution(ExitPolicyParams& p, std::vector<double> probabilities) {
  p = with_kind("distribution");
  p.probabilities = std::move(probabilities);
}

void top_k(ExitPolicyParams& p, std::vector<double> capacities) {
  p = with_kind("router_expert_choice");
  p.router_mode = "top_k";
  p.capacities = std::move(capacities);
}

void schedule(ExitPolicyParams& p, std::vector<ExitScheduleStep> steps) {
  p = with_kind("position_schedule");
  p.schedule = std::move(steps);
}

INSTANTIATE_TEST_SUITE_P(
    Params, ExitValidation,
    testing::Values(
        Case{"UnknownKind", [](ExitPolicyParams& p, DepthStructure&) { p.kind = "confident"; },
             "exit_policy.kind: expected one of none, confidence, adaptive_threshold, "
             "router_expert_choice, router_token_choice, oracle, position_schedule, replay, "
             "distribution, found \"confident\""},
        Case{"ProbabilityCount",
             [](ExitPolicyParams& p, DepthStructure&) {
               distribution(p, {0.5, 0.5});
             },
             "exit_policy.probabilities: expected one probability per exit point (3), found 2"},
        Case{"NegativeProbability",
             [](ExitPolicyParams& p, DepthStructure&) {
               distribution(p, {-0.1, 0.6, 0.5});
             },
             "exit_policy.probabilities: expected probabilities in [0, 1], found -0.1"},
        Case{"ProbabilitySum",
             [](ExitPolicyParams& p, DepthStructure&) {
               distribution(p, {0.5, 0.3, 0.1});
             },
             "exit_policy.probabilities: expected probabilities summing to 1, found a sum of "
             "0.9"},
        Case{"BucketProbabilities",
             [](ExitPolicyParams& p, DepthStructure&) {
               distribution(p, {0.2, 0.3, 0.5});
               p.position_buckets = {{8, {0.2, 0.3, 0.5}}, {16, {0.5, 0.5, 0.5}}};
             },
             "exit_policy.position_buckets[1].probabilities: expected probabilities summing to "
             "1, found a sum of 1.5"},
        Case{"BucketOrder",
             [](ExitPolicyParams& p, DepthStructure&) {
               distribution(p, {0.2, 0.3, 0.5});
               p.position_buckets = {{8, {0.2, 0.3, 0.5}}, {8, {0.2, 0.3, 0.5}}};
             },
             "exit_policy.position_buckets[1].until_position: expected a position above 8 (the "
             "previous bucket's), found 8"},
        Case{"BucketZero",
             [](ExitPolicyParams& p, DepthStructure&) {
               distribution(p, {0.2, 0.3, 0.5});
               p.position_buckets = {{0, {0.2, 0.3, 0.5}}};
             },
             "exit_policy.position_buckets[0].until_position: expected a position of at least "
             "1, found 0"},
        Case{"EmptySchedule", [](ExitPolicyParams& p, DepthStructure&) { schedule(p, {}); },
             "exit_policy.schedule: expected at least one step, found none"},
        Case{"ScheduleStart",
             [](ExitPolicyParams& p, DepthStructure&) {
               schedule(p, {{5, 31}});
             },
             "exit_policy.schedule[0].from_position: expected 0 for the first step, found 5"},
        Case{"ScheduleOrder",
             [](ExitPolicyParams& p, DepthStructure&) {
               schedule(p, {{0, 31}, {0, 21}});
             },
             "exit_policy.schedule[1].from_position: expected a position above 0 (the previous "
             "step's), found 0"},
        Case{"ScheduleDeepening",
             [](ExitPolicyParams& p, DepthStructure&) {
               schedule(p, {{0, 21}, {10, 31}});
             },
             "exit_policy.schedule[1].depth: expected a depth <= 21 (the previous step's; depth "
             "must not increase with position), found 31"},
        Case{"ScheduleTooDeep",
             [](ExitPolicyParams& p, DepthStructure&) {
               schedule(p, {{0, 32}});
             },
             "exit_policy.schedule[0].depth: expected a depth in [1, 31] (the deepest exit "
             "point), found 32"},
        Case{"CapacityCount",
             [](ExitPolicyParams& p, DepthStructure&) {
               top_k(p, {1.0, 0.5});
             },
             "exit_policy.capacities: expected one capacity per recursion (3) in top_k mode, "
             "found 2"},
        Case{"CapacityZero",
             [](ExitPolicyParams& p, DepthStructure&) {
               top_k(p, {1.0, 0.5, 0.0});
             },
             "exit_policy.capacities: expected capacities in (0, 1], found 0"},
        Case{"CapacityAboveOne",
             [](ExitPolicyParams& p, DepthStructure&) {
               top_k(p, {1.5, 0.5, 0.25});
             },
             "exit_policy.capacities: expected capacities in (0, 1], found 1.5"},
        Case{"CapacityIncreasing",
             [](ExitPolicyParams& p, DepthStructure&) {
               top_k(p, {1.0, 0.25, 0.5});
             },
             "exit_policy.capacities: expected non-increasing capacities (hierarchical "
             "filtering), at most 0.25 at recursion 3, found 0.5"},
        Case{"RouterMode",
             [](ExitPolicyParams& p, DepthStructure&) {
               p = with_kind("router_expert_choice");
               p.router_mode = "topk";
             },
             "exit_policy.router_mode: expected threshold or top_k, found \"topk\""},
        Case{"RouterOnPlainModel",
             [](ExitPolicyParams& p, DepthStructure& d) {
               p = with_kind("router_token_choice");
               d = DepthStructure::plain(32);
             },
             "exit_policy.kind: expected a recursive model for router_token_choice, found "
             "model.depth.recursions 0"},
        Case{"RouterOnOtherExitPoints",
             [](ExitPolicyParams& p, DepthStructure& d) {
               p = with_kind("router_expert_choice");
               d.exit_points = {6, 11, 21, 31};
             },
             "exit_policy.kind: expected router_expert_choice on exit points at the ends of "
             "recursions (11, 21, 31), found exit points 6, 11, 21, 31"},
        Case{"ConfidenceMeasure",
             [](ExitPolicyParams& p, DepthStructure&) {
               p = with_kind("confidence");
               p.confidence_measure = "entropy";
             },
             "exit_policy.confidence_measure: expected top1 or margin, found \"entropy\""},
        Case{"CalmDecay",
             [](ExitPolicyParams& p, DepthStructure&) {
               p = with_kind("confidence");
               p.calm_decay = -1;
             },
             "exit_policy.calm_decay: expected a finite number >= 0, found -1"},
        Case{"ThresholdNotFinite",
             [](ExitPolicyParams& p, DepthStructure&) {
               p = with_kind("confidence");
               p.threshold = std::numeric_limits<double>::infinity();
             },
             "exit_policy.threshold: expected a finite number, found inf"}),
    [](const testing::TestParamInfo<Case>& param_info) {
      return std::string(param_info.param.name);
    });

TEST(ExitValidation, ReplayNeedsALookup) {
  EXPECT_THROW(make_exit_policy(with_kind("replay"), DepthStructure::plain(4)),
               std::invalid_argument);
}

TEST(ExitValidation, AcceptsTheDocumentedDefaultsOnEveryPresetItApplies) {
  for (const std::string& name : model_preset_names()) {
    const DepthStructure depth = find_model_preset(name)->depth;
    SCOPED_TRACE(name);
    for (const std::string& kind : exit_policy_names()) {
      ExitPolicyParams p = with_kind(kind.c_str());
      const std::size_t points = depth.effective_exit_points().size();
      p.probabilities.assign(points, 1.0 / static_cast<double>(points));
      p.schedule = {{0, depth.stacked_depth()}};
      p.replay_lookup = [](RequestId, std::int64_t) { return std::optional<int>{}; };
      const bool router = kind.starts_with("router_");
      if (router && !depth.is_recursive())
        continue;
      EXPECT_EQ(make_exit_policy(p, depth)->name(), kind);
    }
  }
}

}  // namespace
}  // namespace exitsim::policy
