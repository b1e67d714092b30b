// Every user mistake gives one exact line: where, which key, what was expected, what was found.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "exitsim/core/error.hpp"
#include "exitsim/scenario/load.hpp"
#include "support/scenario_error.hpp"

namespace exitsim::scenario {
namespace {

using test_support::error_of;

struct BadInput {
  const char* name;
  const char* yaml;
  const char* expected;
};

class BadScenario : public testing::TestWithParam<BadInput> {};

TEST_P(BadScenario, ExactMessage) {
  EXPECT_EQ(error_of(GetParam().yaml), GetParam().expected);
}

const BadInput k_bad_inputs[] = {
    {"UnknownKeyWithSuggestion", "scheduler:\n  max_runing: 4\n",
     "s.yaml:2:3: scheduler.max_runing: unknown key \"max_runing\"; did you mean \"max_running\"?"},
    // simulate never wrote a token trace: the key is gone rather than accepted and ignored.
    {"SimulatorTokenTraceIsNotAnOutput", "outputs:\n  token_trace: true\n",
     "s.yaml:2:3: outputs.token_trace: unknown key \"token_trace\"; expected one of dir, "
     "summary_json, requests_csv, timeline, timeline_max_mb"},
    {"UnknownKeyWithoutSuggestion", "cluster:\n  banana: 4\n",
     "s.yaml:2:3: cluster.banana: unknown key \"banana\"; expected one of replicas, router, "
     "groups"},
    {"UnknownSection", "schedular:\n  max_running: 4\n",
     "s.yaml:1:1: schedular: unknown key \"schedular\"; did you mean \"scheduler\"?"},
    {"WrongType", "scheduler:\n  max_running: abc\n",
     "s.yaml:2:16: scheduler.max_running: expected an integer, found \"abc\""},
    {"FloatForInteger", "scheduler:\n  max_running: 1.5\n",
     "s.yaml:2:16: scheduler.max_running: expected an integer, found \"1.5\""},
    {"OutOfRange", "scheduler:\n  max_running: 0\n",
     "s.yaml:2:16: scheduler.max_running: expected an integer in [1, 1000000], found 0"},
    {"OpenRange", "cost_model:\n  flops_efficiency: 0\n",
     "s.yaml:2:21: cost_model.flops_efficiency: expected a number in (0, 1], found 0"},
    {"SectionNotMapping", "scheduler: 5\n",
     "s.yaml:1:12: scheduler: expected a mapping, found \"5\""},
    {"ListForScalar", "seed: [1, 2]\n", "s.yaml:1:7: seed: expected an integer, found a list"},
    {"NotABoolean", "outputs:\n  timeline: yes\n",
     "s.yaml:2:13: outputs.timeline: expected true or false, found \"yes\""},
    {"BadEnumWithSuggestion", "workload:\n  arrivals:\n    process: poison\n",
     "s.yaml:3:14: workload.arrivals.process: expected one of poisson, gamma, constant, on_off, "
     "found \"poison\"; did you mean \"poisson\"?"},
    {"BadPreset", "model:\n  preset: llama-3-9b\n",
     "s.yaml:2:11: model.preset: expected one of llama-3-8b, llama-2-7b, smollm-135m, "
     "smollm-360m, smollm-1.7b, gemma-2b, tinyllama-1.1b, pythia-1b, llama-3.1-8b, "
     "llama-3.1-70b, llama-3.1-405b, qwen2.5-7b, qwen2.5-72b, mistral-7b, mixtral-8x7b, "
     "mixtral-8x22b, mor-smollm-135m-r2, "
     "mor-smollm-135m-r3, mor-smollm-135m-r4, mor-smollm-360m-r2, mor-smollm-360m-r3, "
     "mor-smollm-360m-r4, mor-smollm-1.7b-r2, mor-smollm-1.7b-r3, mor-smollm-1.7b-r4, "
     "rrt-gemma-1b, rrt-gemma-1b-lora64, layerskip-llama-2-7b or null, found \"llama-3-9b\"; "
     "did you mean \"llama-3-8b\"?"},
    {"NullForRequired", "scheduler:\n  max_running: ~\n",
     "s.yaml:2:3: scheduler.max_running: expected an integer in [1, 1000000], found null"},
    {"BadIdentifier", "scheduler:\n  kind: my-scheduler\n",
     "s.yaml:2:9: scheduler.kind: expected an identifier (letters, digits and _), found "
     "\"my-scheduler\""},
    {"KeyNotForKind", "exit_policy:\n  kind: distribution\n  capacities: [0.5]\n",
     "s.yaml:3:3: exit_policy.capacities: \"capacities\" is not used when exit_policy.kind is "
     "distribution; it applies when exit_policy.kind is router_expert_choice"},
    {"SectionNotForSource",
     "workload:\n  source: trace\n  trace: {path: t.csv}\n"
     "  input_tokens: {dist: fixed}\n",
     "s.yaml:4:3: workload.input_tokens: \"input_tokens\" is not used when workload.source is "
     "trace; it applies when workload.source is synthetic"},
    {"KeyBehindInapplicableKey", "sync:\n  accumulate_threshold: 4\n",
     "s.yaml:2:3: sync.accumulate_threshold: \"accumulate_threshold\" applies only when "
     "sync.exited_tokens is accumulate or head_queue"},
    {"ProbabilitiesNotSummingToOne",
     "model:\n  depth: {exit_points: [8, 16, 32]}\n"
     "exit_policy:\n  kind: distribution\n  probabilities: [0.5, 0.3, 0.1]\n",
     "s.yaml:5:18: exit_policy.probabilities: expected probabilities summing to 1, found a sum of "
     "0.9"},
    {"ProbabilitiesPerExitPoint",
     "exit_policy:\n  kind: distribution\n  probabilities: [0.5, 0.5]\n",
     "s.yaml:3:18: exit_policy.probabilities: expected one probability per exit point (1), "
     "found 2"},
    {"NegativeProbability", "exit_policy:\n  kind: distribution\n  probabilities: [1.5, -0.5]\n",
     "s.yaml:3:19: exit_policy.probabilities[0]: expected a number in [0, 1], found 1.5"},
    {"MissingRequiredForKind", "exit_policy:\n  kind: replay\n",
     "s.yaml:2:3: exit_policy.token_trace: missing required key \"token_trace\" (needed when "
     "exit_policy.kind is replay)"},
    {"TraceNeedsPath", "workload:\n  source: trace\n",
     "s.yaml:2:3: workload.trace.path: missing required key \"path\" (needed when "
     "workload.source is trace)"},
    {"CsvTraceNeedsTheLengthColumns",
     "workload:\n  source: trace\n  trace: {path: t.csv, format: csv, columns: {arrival: t}}\n",
     "s.yaml:3:46: workload.trace.columns.input_tokens: missing required key \"input_tokens\" "
     "(needed when workload.trace.format is csv)"},
    {"ColumnsOnlyForCsvTraces",
     "workload:\n  source: trace\n  trace: {path: t.csv, columns: {input_tokens: p}}\n",
     "s.yaml:3:24: workload.trace.columns: \"columns\" is not used when workload.trace.format "
     "is auto; it applies when workload.trace.format is csv"},
    {"UnknownArrivalUnit",
     "workload:\n  source: trace\n  trace:\n    path: t.csv\n    format: csv\n"
     "    columns: {input_tokens: p, output_tokens: c, arrival_unit: min}\n",
     "s.yaml:6:64: workload.trace.columns.arrival_unit: expected one of s, ms, us, ns, "
     "datetime, found \"min\"; did you mean \"ms\"?"},
    {"ExplicitModelNeedsShape", "model:\n  d_model: 64\n",
     "s.yaml:2:3: model.n_heads: missing required key \"n_heads\" (needed when model.preset and "
     "model.hf_config are null)"},
    {"TopKAboveExperts", "model:\n  preset: mixtral-8x7b\n  experts_per_token: 9\n",
     "s.yaml:3:22: model.experts_per_token: expected an integer in [1, 8] (the experts), found "
     "9"},
    {"TopKOnADenseModel", "model:\n  preset: mistral-7b\n  experts_per_token: 2\n",
     "s.yaml:3:22: model.experts_per_token: expected 0 for a dense MLP (experts is 0), found 2"},
    {"HfConfigNotThere", "model:\n  hf_config: no/such/config.json\n",
     "s.yaml:2:14: model.hf_config: expected the path of a Hugging Face config.json file, found "
     "\"no/such/config.json\" (no such file)"},
    {"HeadsNotDivisible", "model:\n  preset: llama-3-8b\n  n_kv_heads: 5\n",
     "s.yaml:3:15: model.n_kv_heads: expected a divisor of n_heads (32), found 5"},
    {"LoraRankPerRecursion",
     "model:\n  depth: {prelude: 1, block: 10, recursions: 3, coda: 1, lora_rank: [4, 4]}\n",
     "s.yaml:2:69: model.depth.lora_rank: expected one rank per recursion (3), found 2"},
    {"ExitPointsAscending", "model:\n  depth: {exit_points: [16, 8]}\n",
     "s.yaml:2:24: model.depth.exit_points: expected exit points ascending past 16, found 8"},
    {"ExitPointBeyondDepth", "model:\n  depth: {exit_points: [8, 40]}\n",
     "s.yaml:2:24: model.depth.exit_points: expected exit points in [1, 32], found 40"},
    {"UniformMinAboveMax", "workload:\n  input_tokens: {dist: uniform, min: 100, max: 10}\n",
     "s.yaml:2:48: workload.input_tokens.max: expected a maximum >= min (100) for a uniform "
     "distribution, found 10"},
    {"DepthwiseNeedsRecursion", "sync:\n  strategy: depthwise\n",
     "s.yaml:2:13: sync.strategy: depthwise needs a recursive model; model.depth.recursions is 0"},
    {"UnknownSweepKey", "sweep:\n  - key: scheduler.max_runing\n    values: [1, 2]\n",
     "s.yaml:2:10: sweep[0].key: unknown key \"scheduler.max_runing\"; did you mean "
     "\"scheduler.max_running\"?"},
    {"SweepKeyNotScalar", "sweep:\n  - key: model.depth\n    values: [1]\n",
     "s.yaml:2:10: sweep[0].key: not a single-value key \"model.depth\"; expected a key path "
     "such as scheduler.max_running"},
    {"BadSweepValue", "sweep:\n  - key: scheduler.max_running\n    values: [64, 0, 128]\n",
     "s.yaml:3:18: sweep[0].values[1]: expected an integer in [1, 1000000], found 0"},
    {"SweepValueBreaksScenario",
     "sweep:\n  - key: sync.strategy\n    values: [batch_sync, depthwise]\n",
     "s.yaml:3:26: sweep[0].values[1]: with sync.strategy = depthwise: sync.strategy: depthwise "
     "needs a recursive model; model.depth.recursions is 0"},
    {"SweepItemUnknownKey", "sweep:\n  - key: seed\n    value: [1]\n",
     "s.yaml:3:5: sweep[0].value: unknown key \"value\"; did you mean \"values\"?"},
    {"GroupKeyOutsideItsSections",
     "cluster:\n  groups:\n    - count: 2\n      set: [\"workload.requests=5\"]\n",
     "s.yaml:4:13: cluster.groups[0].set[0]: workload.requests: only model, hardware, "
     "cost_model, scheduler and parallel keys may differ between replica groups"},
    {"GroupUnknownKeyWithSuggestion",
     "cluster:\n  groups:\n    - count: 1\n    - set: [\"scheduler.kind=static\", "
     "\"scheduler.max_runing=4\"]\n",
     "s.yaml:4:38: cluster.groups[1].set[1]: scheduler.max_runing: unknown key \"max_runing\"; "
     "did you mean \"max_running\"?"},
    {"GroupUnknownSectionWithSuggestion",
     "cluster:\n  groups:\n    - set: [\"hardwre.preset=h200\"]\n",
     "s.yaml:3:13: cluster.groups[0].set[0]: hardwre.preset: unknown key \"hardwre\"; did you "
     "mean \"hardware\"?"},
    {"GroupBadValue", "cluster:\n  groups:\n    - set: [\"scheduler.max_running=0\"]\n",
     "s.yaml:3:13: cluster.groups[0].set[0]: scheduler.max_running: expected an integer in [1, "
     "1000000], found 0"},
    {"GroupBadPreset", "cluster:\n  groups:\n    - set: [\"hardware.preset=h300\"]\n",
     "s.yaml:3:13: cluster.groups[0].set[0]: hardware.preset: expected one of h100-sxm, h200, "
     "a100-40gb, a100-80gb, l40s or null, found \"h300\"; did you mean \"h200\"?"},
    {"GroupSetNotAnAssignment", "cluster:\n  groups:\n    - set: [scheduler.max_running]\n",
     "s.yaml:3:13: cluster.groups[0].set[0]: expected key.path=value, found "
     "\"scheduler.max_running\""},
    {"GroupBreaksTheScenario",
     "cluster:\n  groups:\n    - count: 1\n      set: [\"cost_model.kind=table\"]\n",
     "s.yaml:4:13: cluster.groups[0]: cost_model.profile: missing required key \"profile\" "
     "(needed when cost_model.kind is calibrated or table)"},
    {"GroupCountZero", "cluster:\n  groups:\n    - count: 0\n",
     "s.yaml:3:14: cluster.groups[0].count: expected an integer in [1, 100000], found 0"},
    {"ReplicasAndGroups", "cluster:\n  replicas: 2\n  groups:\n    - count: 1\n",
     "s.yaml:2:13: cluster.replicas: give replicas or groups, not both; with groups the replica "
     "count is the sum of their counts"},
    {"TooManyReplicasInGroups", "cluster:\n  groups: [{count: 70000}, {count: 40000}]\n",
     "s.yaml:2:11: cluster.groups: expected at most 100000 replicas in all, found 110000"},
    {"SweepReplicasOfGroups",
     "cluster:\n  groups: [{count: 2}]\nsweep:\n  - key: cluster.replicas\n    values: [1]\n",
     "s.yaml:5:14: sweep[0].values[0]: with cluster.replicas = 1: cluster.replicas: give "
     "replicas or groups, not both; with groups the replica count is the sum of their counts"},
    {"DuplicateKey", "seed: 1\nname: a\nseed: 2\n",
     "s.yaml:3:1: duplicate key \"seed\" (first given on line 1)"},
    {"MalformedYaml", "scheduler:\n  max_running: [1,\n",
     "s.yaml:3:1: expected well-formed YAML, found a syntax error (end of sequence flow not "
     "found)"},
    {"NotAMapping", "- a\n- b\n",
     "s.yaml:1:1: expected a mapping of scenario sections (name: ..., model: ...), found a list"},
    {"ScalarDocument", "hello\n",
     "s.yaml:1:1: expected a mapping of scenario sections (name: ..., model: ...), found "
     "\"hello\""},
};

INSTANTIATE_TEST_SUITE_P(Matrix, BadScenario, testing::ValuesIn(k_bad_inputs),
                         [](const testing::TestParamInfo<BadInput>& param) {
                           return std::string(param.param.name);
                         });

TEST(BadOverride, UnknownPath) {
  EXPECT_EQ(error_of("", {"scheduler.max_runing=4"}),
            "--set: scheduler.max_runing: unknown key \"max_runing\"; did you mean "
            "\"max_running\"?");
}

TEST(BadOverride, UnknownSection) {
  EXPECT_EQ(error_of("", {"schedular.max_running=4"}),
            "--set: schedular.max_running: unknown key \"schedular\"; did you mean "
            "\"scheduler\"?");
}

TEST(BadOverride, MissingEquals) {
  EXPECT_EQ(error_of("", {"scheduler.max_running"}),
            "--set: expected key.path=value, found \"scheduler.max_running\"");
}

TEST(BadOverride, BadValue) {
  EXPECT_EQ(error_of("", {"scheduler.max_running=0"}),
            "--set: scheduler.max_running: expected an integer in [1, 1000000], found 0");
}

TEST(BadOverride, PathBelowAValue) {
  EXPECT_EQ(error_of("", {"seed.x=1"}),
            "--set: seed.x: \"seed\" is integer, not a section; set it as a whole");
}

// A --set below a section the file gave as a list or a value used to replace it silently, so a
// scenario the loader refuses alone ran once any key of that section was set.
TEST(BadOverride, BelowASectionTheFileGaveAsAListOrValue) {
  EXPECT_EQ(error_of("workload: [1, 2]\n", {"workload.requests=10"}),
            "s.yaml:1:11: workload: expected a mapping, found a list");
  EXPECT_EQ(error_of("workload: 5\n", {"workload.requests=10"}),
            "s.yaml:1:11: workload: expected a mapping, found \"5\"");
  EXPECT_EQ(error_of("name: x\n", {"workload=5", "workload.requests=10"}),
            "--set: workload: expected a mapping, found \"5\"");
  // A section the file left empty takes the key.
  EXPECT_EQ(error_of("workload:\n", {"workload.requests=10"}), "no error");
}

TEST(BadOverride, MalformedValue) {
  EXPECT_EQ(error_of("", {"sweep=[1,"}),
            "--set: sweep: expected a well-formed YAML value, found a syntax error (end of "
            "sequence flow not found)");
}

TEST(BadOverride, GroupKeyOutsideItsSections) {
  EXPECT_EQ(error_of("", {R"(cluster.groups=[{count: 1, set: ["seed=1"]}])"}),
            "--set: cluster.groups[0].set[0]: seed: only model, hardware, cost_model, scheduler "
            "and parallel keys may differ between replica groups");
}

TEST(BadFile, MissingFile) {
  try {
    load_scenario_file("/nonexistent/scenario.yaml");
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(),
                 "/nonexistent/scenario.yaml: cannot open scenario: No such file or directory");
  }
}

TEST(BadFile, Directory) {
  try {
    load_scenario_file(EXITSIM_SOURCE_DIR);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()),
              std::string(EXITSIM_SOURCE_DIR) + ": cannot open scenario: Is a directory");
  }
}

TEST(BadFile, ErrorsInTheDefaultNameIt) {
  // The error points at the default file's exit_policy mapping, wherever edits move it.
  const std::string_view text = default_scenario_text();
  const auto at = text.find("\nexit_policy:\n");
  ASSERT_NE(at, std::string_view::npos);
  const auto line =
      std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(at), '\n') + 3;
  const std::vector<std::string> set = {"exit_policy.kind=distribution"};
  try {
    load_default_scenario(set);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()),
              "<embedded default>:" + std::to_string(line) +
                  ":3: exit_policy.probabilities: missing required key \"probabilities\" "
                  "(needed when exit_policy.kind is distribution)");
  }
}

}  // namespace
}  // namespace exitsim::scenario
