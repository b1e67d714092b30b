// Steady decode steps reuse the last step's rows instead of asking the scheduler and planning
// again (Replica::start_steady_decode). The outputs must be the step-by-step path's, byte for
// byte: each case runs a scenario both ways and compares the summary, requests.csv,
// timeline.json and every iteration, under the conditions that make steps steady and break
// them (arrivals, completions, preemptions under a tight K/V budget, several replicas), at static
// depth and with per-token exits (each step's exits drawn anew, rollbacks), with prefix caching and
// swap.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "exitsim/scenario/load.hpp"
#include "exitsim/sim/simulator.hpp"
#include "exitsim/sim/workload/workload.hpp"

namespace exitsim::sim {
namespace {

namespace fs = std::filesystem;

struct Outputs {
  SimulationResult result;
  std::string summary_json;
  std::string requests_csv;
  std::string timeline_json;
  std::vector<IterationRecord> iterations;
};

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

Outputs run(const std::vector<std::string>& overrides, bool reuse, const std::string& name) {
  std::vector<std::string> all = overrides;
  all.push_back("workload.requests=400");
  all.push_back("outputs.timeline=true");
  const auto s = scenario::load_default_scenario(all);
  const fs::path dir = fs::temp_directory_path() /
                       ("exitsim_steady_" + name + (reuse ? "_reused" : "_stepped") + "_" +
                        std::to_string(::testing::UnitTest::GetInstance()->random_seed()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  SimulationConfig config = simulation_config_from(s, dir.string());
  config.reuse_steady_decode_steps = reuse;
  Outputs out;
  config.iteration_observer = [&out](const IterationRecord& r) { out.iterations.push_back(r); };
  const auto workload = make_workload(s.workload, s.seed);
  out.result = simulate(config, *workload);
  out.summary_json = summary_to_json(out.result.summary);
  out.requests_csv = read_file(dir / "requests.csv");
  out.timeline_json = read_file(dir / "timeline.json");
  fs::remove_all(dir);
  return out;
}

bool same(const IterationRecord& a, const IterationRecord& b) {
  return a.replica == b.replica && a.start == b.start && a.duration == b.duration &&
         a.sequences == b.sequences && a.prefill_tokens == b.prefill_tokens &&
         a.decode_tokens == b.decode_tokens && a.kv_blocks_used == b.kv_blocks_used &&
         a.kv_blocks_total == b.kv_blocks_total;
}

struct Case {
  std::string name;
  std::vector<std::string> overrides;
  bool preempts = false;  // the case is meant to run out of K/V blocks
  // Nothing waits most of the time. Not so under overload (the queue is rarely empty) nor under
  // static batching (arrivals wait while a batch runs): their steps are seldom steady.
  bool mostly_steady = false;
};

// LayerSkip's Llama 2 7B with per-token exits at its four exit points under `strategy`.
std::vector<std::string> with_exits(const std::string& strategy,
                                    std::vector<std::string> more = {}) {
  more.insert(more.end(),
              {"model.preset=layerskip-llama-2-7b", "scheduler.unservable=reject",
               "exit_policy.kind=distribution", "exit_policy.probabilities=[0.3, 0.3, 0.2, 0.2]",
               "sync.strategy=" + strategy});
  return more;
}

// MoR-SmolLM-1.7B (3 recursions) stepping depth-wise, exited tokens handled as `exited`.
std::vector<std::string> depthwise(const std::string& exited, std::vector<std::string> more = {}) {
  more.insert(more.end(),
              {"model.preset=mor-smollm-1.7b-r3", "scheduler.unservable=reject",
               "exit_policy.kind=distribution", "exit_policy.probabilities=[0.4, 0.3, 0.3]",
               "sync.strategy=depthwise", "sync.exited_tokens=" + exited});
  return more;
}

class SteadyDecodeSteps : public testing::TestWithParam<Case> {};

TEST_P(SteadyDecodeSteps, GiveTheStepByStepOutputsExactly) {
  const Case& c = GetParam();
  const Outputs stepped = run(c.overrides, false, c.name);
  const Outputs reused = run(c.overrides, true, c.name);

  // The fast path ran (often enough that the comparison means something), and most steps took
  // it where nothing waits; the step-by-step run never did.
  EXPECT_EQ(stepped.result.totals.steady_decode_steps, 0);
  const auto iterations = static_cast<std::int64_t>(reused.iterations.size());
  EXPECT_GT(reused.result.totals.steady_decode_steps, 300) << iterations;
  if (c.mostly_steady) {
    EXPECT_GT(reused.result.totals.steady_decode_steps, iterations / 2) << iterations;
  }
  if (c.preempts) {
    EXPECT_GT(reused.result.summary.preemptions, 0) << "the K/V budget must bind";
  }

  EXPECT_EQ(reused.summary_json, stepped.summary_json);
  EXPECT_EQ(reused.requests_csv, stepped.requests_csv);
  EXPECT_FALSE(reused.timeline_json.empty());
  EXPECT_EQ(reused.timeline_json, stepped.timeline_json);
  ASSERT_EQ(reused.iterations.size(), stepped.iterations.size());
  for (std::size_t i = 0; i < reused.iterations.size(); ++i)
    ASSERT_TRUE(same(reused.iterations[i], stepped.iterations[i])) << "iteration " << i;
  const SimulationTotals& a = reused.result.totals;
  const SimulationTotals& b = stepped.result.totals;
  EXPECT_EQ(a.events, b.events);
  EXPECT_EQ(a.tokens_emitted, b.tokens_emitted);
  EXPECT_EQ(a.max_kv_blocks_used, b.max_kv_blocks_used);
  EXPECT_EQ(a.end_time, b.end_time);
  // Accumulated event by event in both: the same additions in the same order.
  EXPECT_EQ(a.mean_requests_in_system, b.mean_requests_in_system);
}

INSTANTIATE_TEST_SUITE_P(
    Schedulers, SteadyDecodeSteps,
    testing::Values(
        Case{"continuous", {"scheduler.kind=continuous"}, false, true},
        Case{"chunked_tight_kv",
             {"scheduler.kind=chunked_prefill", "scheduler.kv_blocks=900",
              "scheduler.max_batched_tokens=2048", "workload.arrivals.rate=40"},
             true},
        Case{"continuous_tight_kv",
             {"scheduler.kind=continuous", "scheduler.kv_blocks=900", "workload.arrivals.rate=40"},
             true},
        Case{"static", {"scheduler.kind=static"}},
        Case{"shortest_prompt_first", {"scheduler.kind=shortest_prompt_first"}, false, true},
        Case{"batch_sync_exits", with_exits("batch_sync"), false, true},
        Case{"state_copy_exits", with_exits("state_copy"), false, true},
        Case{"deferred_fill_exits_rollback",
             with_exits("deferred_fill", {"sync.rollback_probability=0.3"}), false, true},
        Case{"recursive_state_copy_exits",
             {"model.preset=mor-smollm-1.7b-r3", "scheduler.unservable=reject",
              "exit_policy.kind=distribution", "exit_policy.probabilities=[0.4, 0.3, 0.3]",
              "sync.strategy=state_copy"},
             false,
             true},
        Case{"recursive_skip_kv_exits_tight_kv",
             {"model.preset=mor-smollm-1.7b-r3", "scheduler.unservable=reject",
              "exit_policy.kind=distribution", "exit_policy.probabilities=[0.4, 0.3, 0.3]",
              "sync.strategy=skip_kv", "scheduler.kv_blocks=400", "workload.arrivals.rate=40"},
             true},
        Case{"depthwise_immediate", depthwise("immediate"), false, true},
        Case{"depthwise_accumulate", depthwise("accumulate"), false, true},
        // head_queue takes no steady steps: a sequence whose head ran waits in the queue.
        Case{"depthwise_accumulate_tight_kv",
             depthwise("accumulate", {"scheduler.kv_blocks=400", "workload.arrivals.rate=40"}),
             true},
        Case{"state_copy_exits_tight_kv",
             with_exits("state_copy", {"scheduler.kv_blocks=900", "workload.arrivals.rate=40"}),
             true},
        Case{"prefix_caching_system_prompts",
             {"scheduler.prefix_caching=true", "workload.prefix.kind=system_prompts",
              "workload.prefix.prompts=4", "workload.prefix.tokens=512"},
             false,
             true},
        Case{"prefix_caching_tight_kv",
             {"scheduler.prefix_caching=true", "workload.prefix.kind=system_prompts",
              "workload.prefix.prompts=4", "workload.prefix.tokens=512", "scheduler.kv_blocks=900",
              "workload.arrivals.rate=40"},
             true},
        Case{"swap_tight_kv",
             {"scheduler.preemption=swap", "scheduler.kv_blocks=900", "workload.arrivals.rate=40"},
             true},
        Case{"three_replicas_odd_blocks",
             {"cluster.replicas=3", "scheduler.block_size=7", "cluster.router=least_outstanding"},
             false,
             true}),
    [](const testing::TestParamInfo<Case>& param) { return param.param.name; });

}  // namespace
}  // namespace exitsim::sim
