// chunked_prefill's thrash (prompts admitted on their first chunk's blocks preempting each other)
// is a warning on the console and in summary.json, naming scheduler.reserve_prompt_blocks with
// the recomputed tokens and their share of all tokens computed.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "exitsim/scenario/load.hpp"
#include "exitsim/sim/metrics/metrics.hpp"
#include "exitsim/sim/simulator.hpp"
#include "exitsim/sim/workload/workload.hpp"
#include "thrashing_workload.hpp"

namespace exitsim::sim {
namespace {

struct ObservedRun {
  SimulationResult result;
  std::int64_t computed_tokens = 0;  // summed over the iterations the observer saw
};

ObservedRun run(const std::vector<std::string>& overrides) {
  const scenario::Scenario s = scenario::load_default_scenario(overrides);
  SimulationConfig config = simulation_config_from(s, "");
  ObservedRun out;
  config.iteration_observer = [&out](const IterationRecord& iteration) {
    out.computed_tokens += iteration.prefill_tokens + iteration.decode_tokens;
  };
  const auto workload = make_workload(s.workload, s.seed);
  out.result = simulate(config, *workload);
  return out;
}

std::vector<std::string> thrash_warnings(const MetricsSummary& summary) {
  std::vector<std::string> out;
  const nlohmann::json json = nlohmann::json::parse(summary_to_json(summary));
  for (const auto& warning : json.at("warnings")) {
    const auto line = warning.get<std::string>();
    if (line.rfind("scheduler.reserve_prompt_blocks:", 0) == 0)
      out.push_back(line);
  }
  return out;
}

const std::vector<std::string>& k_thrashing = test_workloads::k_chunked_prefill_thrashing;

// Every request computes its prompt and feeds back each output token but the last; whatever the
// iterations computed beyond that was computed again after a preemption. The warning's figures
// are that count and its share of the iterations' tokens.
TEST(ThrashWarning, ChunkedPrefillThrashingIsAWarningWithTheRecomputedTokens) {
  const ObservedRun thrash = run(k_thrashing);
  const MetricsSummary& summary = thrash.result.summary;
  const std::int64_t needed = summary.input_tokens + summary.output_tokens - summary.requests;
  const std::int64_t recomputed = thrash.computed_tokens - needed;
  ASSERT_GT(recomputed, thrash.computed_tokens / 10);
  EXPECT_EQ(summary.recomputed_tokens, recomputed);

  const std::vector<std::string> warnings = thrash_warnings(summary);
  ASSERT_EQ(warnings.size(), 1U);
  const std::string figures = fmt::format(
      "{} preemptions threw away {} computed tokens to recompute them, {:.1f}% of the {} tokens",
      summary.preemptions, recomputed,
      100.0 * static_cast<double>(recomputed) / static_cast<double>(thrash.computed_tokens),
      thrash.computed_tokens);
  EXPECT_NE(warnings[0].find(figures), std::string::npos) << warnings[0] << "\n" << figures;
  EXPECT_NE(warnings[0].find("scheduler.reserve_prompt_blocks: true"), std::string::npos);
  // And on the console, which prints the same lines.
  EXPECT_NE(format_summary(summary).find(warnings[0]), std::string::npos);
}

// The remedy itself warns of nothing; nor does a run whose few preemptions (short outputs, so
// sequences leave before the prompts behind them need their blocks) recompute under a tenth of
// its work: 15 output tokens, 2 preemptions and 2.4% of the tokens on the H100 preset. (At 20,
// with the preset's fitted kernel times, 14 preemptions recompute 12%: a thrash, and a warning.)
TEST(ThrashWarning, NoWarningWithReservationOrWithoutThrash) {
  auto reserving = k_thrashing;
  reserving.push_back("scheduler.reserve_prompt_blocks=true");
  EXPECT_TRUE(thrash_warnings(run(reserving).result.summary).empty());

  auto short_outputs = k_thrashing;
  short_outputs.back() = "workload.output_tokens={dist: fixed, value: 15}";
  const ObservedRun calm = run(short_outputs);
  EXPECT_GT(calm.result.summary.preemptions, 0);
  EXPECT_LT(calm.result.summary.recomputed_tokens, calm.computed_tokens / 10);
  EXPECT_TRUE(thrash_warnings(calm.result.summary).empty());
}

}  // namespace
}  // namespace exitsim::sim
