#include "exitsim/scenario/load.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "exitsim/core/error.hpp"
#include "exitsim/core/presets.hpp"

namespace exitsim::scenario {
namespace {

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

const std::filesystem::path k_root = EXITSIM_SOURCE_DIR;

// Rendering and loading again must give the same scenario and the same text.
void expect_round_trip(const Scenario& s) {
  const std::string text = render_resolved_yaml(s);
  const Scenario again = load_scenario_text(text, "<rendered>");
  EXPECT_TRUE(again == s) << text;
  EXPECT_EQ(render_resolved_yaml(again), text);
}

TEST(LoadScenario, DefaultHasDocumentedValues) {
  const Scenario s = load_default_scenario();
  EXPECT_EQ(s.name, "default");
  EXPECT_EQ(s.seed, 42u);
  EXPECT_EQ(s.model.preset, "llama-3-8b");
  EXPECT_EQ(s.model.shape.d_model, 4096);
  EXPECT_EQ(s.model.shape.depth.prelude_layers, 32);
  EXPECT_EQ(s.hardware.preset, "h100-sxm");
  EXPECT_EQ(s.hardware.spec.peak_flops_for(DType::bf16),
            find_hardware_preset("h100-sxm")->peak_flops_for(DType::bf16));
  EXPECT_EQ(s.hardware.spec.launch_overhead, 4000);
  EXPECT_EQ(s.cost_model.kind, "roofline");
  EXPECT_DOUBLE_EQ(s.cost_model.flops_efficiency, 0.7);
  EXPECT_DOUBLE_EQ(s.cost_model.bandwidth_efficiency, 0.85);
  EXPECT_EQ(s.workload.source, "synthetic");
  EXPECT_EQ(s.workload.requests, 2000);
  EXPECT_EQ(s.workload.arrivals.process, "poisson");
  EXPECT_DOUBLE_EQ(s.workload.arrivals.rate, 4.0);
  EXPECT_EQ(s.workload.input_tokens.dist, "lognormal");
  EXPECT_DOUBLE_EQ(s.workload.input_tokens.mean, 1024);
  EXPECT_DOUBLE_EQ(s.workload.input_tokens.sigma, 1.0);
  EXPECT_EQ(s.workload.input_tokens.min, 16);
  EXPECT_EQ(s.workload.input_tokens.max, 6144);  // + 2048 output = the model's window
  EXPECT_EQ(s.model.shape.max_context, 8192);
  EXPECT_EQ(s.scheduler.unservable, "error");
  EXPECT_DOUBLE_EQ(s.scheduler.watermark_fraction, 0.01);
  EXPECT_FALSE(s.scheduler.reserve_prompt_blocks);
  EXPECT_EQ(s.workload.trace.max_requests, 0);
  EXPECT_DOUBLE_EQ(s.workload.output_tokens.mean, 256);
  EXPECT_DOUBLE_EQ(s.workload.output_tokens.sigma, 0.8);
  EXPECT_EQ(s.workload.output_tokens.min, 1);
  EXPECT_EQ(s.workload.output_tokens.max, 2048);
  EXPECT_EQ(s.exit_policy.kind, "none");
  EXPECT_EQ(s.sync.strategy, "full_depth");
  EXPECT_EQ(s.scheduler.kind, "continuous");
  EXPECT_EQ(s.scheduler.max_running, 256);
  EXPECT_EQ(s.scheduler.max_batched_tokens, 8192);
  EXPECT_EQ(s.scheduler.block_size, 16);
  EXPECT_EQ(s.scheduler.kv_blocks, 0);
  EXPECT_DOUBLE_EQ(s.scheduler.memory_reserve_fraction, 0.1);
  EXPECT_EQ(s.scheduler.preemption, "recompute");
  EXPECT_EQ(s.cluster.replicas, 1);
  EXPECT_EQ(s.cluster.router, "round_robin");
  EXPECT_EQ(s.slo.ttft_ms, 2000.0);
  EXPECT_EQ(s.slo.tpot_ms, 200.0);
  EXPECT_FALSE(s.slo.e2e_ms.has_value());
  EXPECT_TRUE(s.sweep.empty());
  EXPECT_EQ(s.outputs.dir, "out");
}

TEST(LoadScenario, EmptyDocumentEqualsDefault) {
  // default.yaml spells out the schema defaults, so an empty scenario is the same scenario.
  EXPECT_TRUE(load_scenario_text("", "empty.yaml") == load_default_scenario());
}

TEST(LoadScenario, DefaultFileIsTheEmbeddedText) {
  EXPECT_EQ(read_text(k_root / "scenarios/default.yaml"), std::string(default_scenario_text()));
}

TEST(LoadScenario, DefaultRoundTrips) {
  expect_round_trip(load_default_scenario());
}

TEST(LoadScenario, EveryExampleLoadsAndRoundTrips) {
  ::setenv("EXITSIM_TRACES", "/traces", 0);  // the trace examples name their folder by it
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator(k_root / "scenarios/examples")) {
    if (entry.path().extension() != ".yaml")
      continue;
    SCOPED_TRACE(entry.path().string());
    expect_round_trip(load_scenario_file(entry.path().string()));
    ++count;
  }
  EXPECT_GE(count, 2);
}

TEST(LoadScenario, GenericCsvTraceColumnsLoadAndRoundTrip) {
  const Scenario s = load_scenario_text(
      "workload:\n  source: trace\n  trace:\n    path: t.csv\n    format: csv\n"
      "    columns: {arrival: ts, arrival_unit: ms, input_tokens: prompt, output_tokens: out}\n",
      "s.yaml");
  EXPECT_EQ(s.workload.trace.format, "csv");
  EXPECT_EQ(s.workload.trace.columns.arrival, "ts");
  EXPECT_EQ(s.workload.trace.columns.arrival_unit, "ms");
  EXPECT_EQ(s.workload.trace.columns.input_tokens, "prompt");
  EXPECT_EQ(s.workload.trace.columns.output_tokens, "out");
  expect_round_trip(s);
  // Without an arrival column the rows carry no times; the unit defaults to seconds.
  const Scenario lengths = load_scenario_text(
      "workload:\n  source: trace\n  trace:\n    path: t.csv\n    format: csv\n"
      "    columns: {input_tokens: prompt, output_tokens: out}\n",
      "s.yaml");
  EXPECT_EQ(lengths.workload.trace.columns.arrival, "");
  EXPECT_EQ(lengths.workload.trace.columns.arrival_unit, "s");
  expect_round_trip(lengths);
}

TEST(LoadScenario, ExamplesResolveAsDescribed) {
  // The examples name the public traces through $EXITSIM_TRACES.
  ::setenv("EXITSIM_TRACES", "/data/traces", 1);
  const Scenario azure =
      load_scenario_file((k_root / "scenarios/examples/azure_replay.yaml").string());
  ::unsetenv("EXITSIM_TRACES");
  EXPECT_EQ(azure.workload.source, "trace");
  EXPECT_EQ(azure.workload.trace.path, "/data/traces/azure_llm_2023_conv.csv");
  EXPECT_DOUBLE_EQ(azure.workload.trace.rate_scale, 2.0);
  EXPECT_EQ(azure.cluster.replicas, 4);
  ASSERT_EQ(azure.sweep.size(), 1u);
  EXPECT_EQ(azure.sweep[0].key, "scheduler.max_running");
  EXPECT_EQ(azure.sweep[0].values, (std::vector<std::string>{"16", "32", "64", "128", "256"}));

  const Scenario mor = load_scenario_file((k_root / "scenarios/examples/mor_depth.yaml").string());
  EXPECT_EQ(mor.model.shape.depth.recursions, 3);
  EXPECT_EQ(mor.model.shape.depth.effective_exit_points(), (std::vector<int>{11, 21, 31}));
  EXPECT_EQ(mor.model.shape.d_model, 960);  // from the smollm-360m preset
  EXPECT_EQ(mor.exit_policy.kind, "distribution");
  ASSERT_EQ(mor.exit_policy.position_buckets.size(), 1u);
  EXPECT_EQ(mor.exit_policy.position_buckets[0].until_position, 32);
  EXPECT_EQ(mor.sync.strategy, "skip_kv");
}

TEST(LoadScenario, ExplicitModelAndHardwareRoundTrip) {
  const Scenario s = load_scenario_text(R"(
model:
  name: tiny
  d_model: 256
  n_heads: 8
  n_kv_heads: 2
  head_dim: 32
  ffn_dim: 1024
  vocab: 1000
  depth: {prelude: 2, block: 2, recursions: 2, coda: 1, exit_points: [4, 6]}
hardware:
  peak_tflops: {bf16: 123.4, fp32: 61.7}
  memory_bandwidth_gbps: 1555.5
  memory_gib: 24
  launch_overhead_us: 3.3
exit_policy:
  kind: position_schedule
  schedule:
    - {from_position: 0, depth: 6}
    - {from_position: 100, depth: 4}
)",
                                        "explicit.yaml");
  EXPECT_EQ(s.model.preset, "");
  EXPECT_EQ(s.model.shape.name, "tiny");
  EXPECT_EQ(s.hardware.preset, "");
  EXPECT_EQ(s.hardware.spec.name, "custom");
  EXPECT_EQ(s.hardware.spec.memory_bytes, std::int64_t{24} << 30);
  EXPECT_EQ(s.hardware.spec.launch_overhead, 3300);
  ASSERT_EQ(s.exit_policy.schedule.size(), 2u);
  EXPECT_EQ(s.exit_policy.schedule[1].depth, 4);
  expect_round_trip(s);
}

TEST(LoadScenario, EveryPresetRoundTrips) {
  for (const std::string& hw : hardware_preset_names()) {
    for (const std::string& model : model_preset_names()) {
      const std::vector<std::string> set = {"hardware.preset=" + hw, "model.preset=" + model};
      SCOPED_TRACE(hw + " " + model);
      expect_round_trip(load_default_scenario(set));
    }
  }
}

TEST(Overrides, ScalarNestedListAndNull) {
  const std::vector<std::string> set = {
      "scheduler.max_running=64",
      "model.depth.recursions=3",
      "model.depth.block=10",
      "model.depth.prelude=1",
      "model.depth.coda=1",
      "model.depth.lora_rank=[0, 4, 4]",
      "slo.ttft_ms=null",
      "exit_policy={kind: distribution, probabilities: [0.25, 0.25, 0.5]}",
      // Changing a kind replaces the section: the file's lognormal keys would not apply.
      "workload.output_tokens={dist: fixed, value: 17}",
  };
  const Scenario s = load_default_scenario(set);
  EXPECT_EQ(s.scheduler.max_running, 64);
  EXPECT_EQ(s.model.shape.depth.recursions, 3);
  EXPECT_EQ(s.model.shape.depth.lora_rank, (std::vector<int>{0, 4, 4}));
  EXPECT_FALSE(s.slo.ttft_ms.has_value());
  EXPECT_EQ(s.exit_policy.probabilities, (std::vector<double>{0.25, 0.25, 0.5}));
  EXPECT_EQ(s.workload.output_tokens.value, 17);
  expect_round_trip(s);
}

TEST(Overrides, CreateKeysAbsentFromTheFile) {
  const std::vector<std::string> set = {"workload.trace.path=t.csv", "workload.source=trace",
                                        "sweep=[{key: cluster.replicas, values: [1, 2]}]"};
  const Scenario s = load_scenario_text("name: x\n", "x.yaml", set);
  EXPECT_EQ(s.workload.source, "trace");
  EXPECT_EQ(s.workload.trace.path, "t.csv");
  ASSERT_EQ(s.sweep.size(), 1u);
  EXPECT_EQ(s.sweep[0].values, (std::vector<std::string>{"1", "2"}));
}

TEST(Overrides, LastAssignmentWins) {
  const std::vector<std::string> set = {"seed=1", "seed=2"};
  EXPECT_EQ(load_default_scenario(set).seed, 2u);
}

TEST(Overrides, ValueContainingEquals) {
  const std::vector<std::string> set = {"name=a=b"};
  EXPECT_EQ(load_default_scenario(set).name, "a=b");
}

TEST(LoadScenario, PresetWithOverriddenShapeField) {
  const Scenario s = load_scenario_text("model: {preset: llama-2-7b, n_kv_heads: 8}\n", "m.yaml");
  EXPECT_EQ(s.model.preset, "llama-2-7b");
  EXPECT_EQ(s.model.shape.n_kv_heads, 8);
  EXPECT_EQ(s.model.shape.ffn_dim, 11008);
  expect_round_trip(s);
}

TEST(LoadScenario, SweepValuesAreCanonical) {
  const Scenario s = load_scenario_text(R"(
sweep:
  - key: exit_policy.kind
    values: [none, oracle]
  - key: slo.e2e_ms
    values: [null, 1.50, 3e3]
)",
                                        "s.yaml");
  ASSERT_EQ(s.sweep.size(), 2u);
  EXPECT_EQ(s.sweep[1].values, (std::vector<std::string>{"null", "1.5", "3000"}));
  expect_round_trip(s);
}

}  // namespace
}  // namespace exitsim::scenario

namespace exitsim::scenario {
namespace {

std::string override_error(const std::vector<std::string>& set) {
  try {
    load_default_scenario(set);
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

TEST(Overrides, ChangingAKindDropsTheFileKeysThatNoLongerApply) {
  const Scenario s = load_default_scenario(
      std::vector<std::string>{"workload.source=trace", "workload.trace.path=t.csv"});
  EXPECT_EQ(s.workload.source, "trace");
  EXPECT_EQ(s.workload.trace.path, "t.csv");

  const Scenario fixed = load_default_scenario(std::vector<std::string>{
      "workload.output_tokens.dist=fixed", "workload.output_tokens.value=64"});
  EXPECT_EQ(fixed.workload.output_tokens.dist, "fixed");
  EXPECT_EQ(fixed.workload.output_tokens.value, 64);
  // The new kind's own defaults apply; its required keys are still required.
  EXPECT_EQ(load_default_scenario(std::vector<std::string>{"workload.output_tokens.dist=fixed"})
                .workload.output_tokens.value,
            256);
  EXPECT_EQ(override_error({"workload.source=trace"}),
            "<embedded default>:36:3: workload.trace.path: missing required key \"path\" (needed "
            "when workload.source is trace)");
}

// The synthetic count used to cap a replayed trace too: the Azure trace's 19,366 requests became
// its first 2,000 without a word. A trace replays whole unless workload.trace.max_requests says.
TEST(Overrides, TheSyntheticRequestCountDoesNotApplyToATrace) {
  const Scenario s = load_default_scenario(
      std::vector<std::string>{"workload.source=trace", "workload.trace.path=t.csv"});
  EXPECT_EQ(s.workload.trace.max_requests, 0);
  EXPECT_EQ(override_error(
                {"workload.source=trace", "workload.trace.path=t.csv", "workload.requests=500"}),
            "--set: workload.requests: \"requests\" is not used when workload.source is trace; it "
            "applies when workload.source is synthetic");
  EXPECT_EQ(load_default_scenario(std::vector<std::string>{"workload.source=trace",
                                                           "workload.trace.path=t.csv",
                                                           "workload.trace.max_requests=500"})
                .workload.trace.max_requests,
            500);
}

// The synthetic defaults' clamp [16, 6144] must not reshape a trace's measured lengths.
TEST(Overrides, EmpiricalLengthsAreClampedOnlyToBoundsTheUserGives) {
  const Scenario open = load_default_scenario(std::vector<std::string>{
      "workload.input_tokens.dist=empirical", "workload.input_tokens.path=t.csv"});
  EXPECT_EQ(open.workload.input_tokens.min, 1);
  EXPECT_EQ(open.workload.input_tokens.max, 0);
  const Scenario bounded = load_default_scenario(std::vector<std::string>{
      "workload.input_tokens.dist=empirical", "workload.input_tokens.path=t.csv",
      "workload.input_tokens.max=4000"});
  EXPECT_EQ(bounded.workload.input_tokens.min, 1);
  EXPECT_EQ(bounded.workload.input_tokens.max, 4000);
}

TEST(Overrides, AKeyThatDoesNotApplyIsStillAnErrorWhenTheOverrideGivesIt) {
  EXPECT_EQ(override_error({"workload.trace.rate_scale=2"}),
            "--set: workload.trace: \"trace\" is not used when workload.source is synthetic; it "
            "applies when workload.source is trace");
}

}  // namespace
}  // namespace exitsim::scenario

namespace exitsim::scenario {
namespace {

// A scenario's input paths name files beside it, as in most configuration systems; --set values
// are the working directory's, as a shell user expects.
class ScenarioPaths : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("exitsim_paths_" + std::to_string(::getpid())) / "configs";
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_.parent_path()); }
  std::string write(const std::string& text) const {
    const std::filesystem::path path = dir_ / "s.yaml";
    std::ofstream(path) << text;
    return path.string();
  }
  std::filesystem::path dir_;
};

TEST_F(ScenarioPaths, RelativePathsInAFileAreBesideIt) {
  const std::string path = write(
      "cost_model: {kind: table, profile: costs.csv}\n"
      "exit_policy: {kind: replay, token_trace: ../traces/t.csv}\n"
      "workload: {source: trace, trace: {path: /abs/trace.csv}}\n"
      "cluster:\n  groups:\n    - count: 1\n      set: [\"cost_model.profile=other.csv\"]\n");
  const Scenario s = load_scenario_file(path);
  EXPECT_EQ(s.cost_model.profile, (dir_ / "costs.csv").string());
  EXPECT_EQ(s.exit_policy.token_trace, (dir_.parent_path() / "traces" / "t.csv").string());
  EXPECT_EQ(s.workload.trace.path, "/abs/trace.csv");  // absolute: as written
  ASSERT_EQ(s.replica_groups.size(), 1U);
  EXPECT_EQ(s.replica_groups[0].cost_model.profile, (dir_ / "other.csv").string());
}

TEST_F(ScenarioPaths, SetValuesAreTheWorkingDirectorysAndTextHasNoFile) {
  const std::string path = write("cost_model: {kind: table, profile: costs.csv}\n");
  const std::vector<std::string> overrides = {"cost_model.profile=mine.csv"};
  EXPECT_EQ(load_scenario_file(path, overrides).cost_model.profile, "mine.csv");
  // Text that is no file's (the embedded default, a program's string) keeps its paths.
  EXPECT_EQ(load_scenario_text("cost_model: {kind: table, profile: costs.csv}\n", "inline", {})
                .cost_model.profile,
            "costs.csv");
}

TEST_F(ScenarioPaths, TracesVariableNamesTheTracesFolder) {
  const std::string path =
      write("workload:\n  source: trace\n  trace:\n    path: $EXITSIM_TRACES/azure.csv\n");
  ::setenv("EXITSIM_TRACES", "/srv/traces", 1);
  EXPECT_EQ(load_scenario_file(path).workload.trace.path, "/srv/traces/azure.csv");
  const std::vector<std::string> braced = {"workload.trace.path=${EXITSIM_TRACES}/b.csv"};
  EXPECT_EQ(load_scenario_file(path, braced).workload.trace.path, "/srv/traces/b.csv");
  ::unsetenv("EXITSIM_TRACES");
  try {
    (void)load_scenario_file(path);
    FAIL() << "an unset EXITSIM_TRACES was accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()),
              path +
                  ":4:11: workload.trace.path: expected $EXITSIM_TRACES to name the folder of "
                  "the public request traces (export EXITSIM_TRACES=/path/to/traces), found it "
                  "unset");
  }
}

}  // namespace
}  // namespace exitsim::scenario

namespace exitsim::scenario {
namespace {

// A sweep parses its file once and resolves it per point: each load must be what loading the file
// with those overrides gives, with the file's relative input paths resolved, and an override of
// one load must not leak into the next.
TEST(ScenarioSource, LoadsWhatLoadingTheFileGives) {
  const std::string path = (k_root / "scenarios/examples/pipeline_tiny_cpu.yaml").string();
  const ScenarioSource source = ScenarioSource::file(path);
  const std::vector<std::vector<std::string>> overrides = {
      {},
      {"sync.strategy=depthwise", "sweep=[]"},
      {"scheduler.max_running=4", "exit_policy.threshold=0.3"},
      {}};
  for (const std::vector<std::string>& o : overrides) {
    const Scenario expected = load_scenario_file(path, o);
    const Scenario loaded = source.load(o);
    EXPECT_TRUE(loaded == expected);
    EXPECT_EQ(render_resolved_yaml(loaded), render_resolved_yaml(expected));
  }
  EXPECT_EQ(source.load().sync.strategy, load_scenario_file(path).sync.strategy);
  EXPECT_NE(source.load({{"sync.strategy=depthwise"}}).sync.strategy, source.load().sync.strategy);
  EXPECT_TRUE(ScenarioSource::embedded_default().load({{"seed=3"}}) ==
              load_default_scenario({{"seed=3"}}));
  EXPECT_TRUE(ScenarioSource::file_or_default("").load() == load_default_scenario());
}

TEST(ScenarioSource, AFileThatDoesNotParseFailsAtOnce) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "exitsim_source_test";
  std::filesystem::create_directories(dir);
  const std::filesystem::path bad = dir / "bad.yaml";
  std::ofstream(bad) << "seed: [1, 2\n";
  EXPECT_THROW(ScenarioSource::file(bad.string()), InputError);
  EXPECT_THROW(ScenarioSource::file((dir / "absent.yaml").string()), InputError);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace exitsim::scenario
