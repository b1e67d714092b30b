// `exitsim engine run` takes its scheduling, exits and swap tier from the one scenario adapter
// (exitsim/setup), as the simulator does: the two regressions of issue 44 it fixed.
#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "support/cli_fixture.hpp"

namespace {

using cli_support::Cli;
using cli_support::Result;
namespace fs = std::filesystem;

// Every token row of a token trace without its policy, replica and time columns: request,
// position, exit depth, exit point and score, what a replay must reproduce.
std::vector<std::string> exits_of(const std::string& trace) {
  std::vector<std::string> rows;
  std::size_t at = 0;
  while (at < trace.size()) {
    const std::size_t end = trace.find('\n', at);
    const std::string line = trace.substr(at, end - at);
    at = end == std::string::npos ? trace.size() : end + 1;
    if (line.empty() || line[0] < '0' || line[0] > '9')
      continue;  // the version line and the header
    std::size_t comma = 0;
    for (int field = 0; field < 5 && comma != std::string::npos; ++field)
      comma = line.find(',', comma + (field > 0 ? 1 : 0));
    rows.push_back(line.substr(0, comma));
  }
  return rows;
}

// The host tier of a bf16 model is twice an fp32 model's: the CLI used to size it in fp32 bytes
// for every dtype, half the simulator's tier for the same scenario under `validate`.
TEST_F(Cli, EngineRunSizesTheHostTierInTheModelsDtype) {
  const fs::path corpus = file("corpus.txt", std::string(500, 'a'));
  const fs::path model = dir_ / "model";
  ASSERT_EQ(run("engine random-model -o '" + model.string() + "'").exit_code, 0);
  // The random tiny model has 2 K/V heads of 32 dimensions. A pool block of 8 tokens is K and V
  // (2) x 2 x 32 x 8 elements: 2,048 bytes in bf16, 4,096 in fp32. 2^-10 GiB = 1,048,576 bytes
  // of host swap space hold 512 and 256 of them.
  const std::string squeezed =
      "engine run --model '" + model.string() + "' --text '" + corpus.string() +
      "' --set scheduler.preemption=swap --set workload.requests=8 --set "
      "workload.input_tokens.dist=fixed --set workload.input_tokens.value=32 --set "
      "workload.output_tokens.dist=fixed --set workload.output_tokens.value=32 --set "
      "scheduler.kv_blocks=12 --set scheduler.block_size=8 --set "
      "hardware.host_swap_gb=0.0009765625 --no-output";
  const Result bf16 = run(squeezed + " --set model.dtype=bf16");
  ASSERT_EQ(bf16.exit_code, 0) << bf16.err;
  EXPECT_NE(bf16.out.find("to the host tier of 512 blocks"), std::string::npos) << bf16.out;
  const Result fp32 = run(squeezed + " --set model.dtype=fp32");
  ASSERT_EQ(fp32.exit_code, 0) << fp32.err;
  EXPECT_NE(fp32.out.find("to the host tier of 256 blocks"), std::string::npos) << fp32.out;
}

// A replay of a previous run's token trace runs (it stopped with "internal error: replay exit
// policy: no token-trace lookup was supplied", exit 3) and takes every token's exit from it.
TEST_F(Cli, EngineRunReplaysAPreviousRunsTokenTrace) {
  const std::string common =
      random_model_and_text("A replay takes each token's exit from the trace. ", 200) +
      " --set workload.requests=4 --set 'workload.input_tokens={dist: fixed, value: 16}'"
      " --set 'workload.output_tokens={dist: fixed, value: 8}' --set sync.strategy=skip_kv";
  const fs::path first = dir_ / "first";
  const Result drawn = run("engine run " + common +
                           " --set exit_policy.kind=distribution"
                           " --set 'exit_policy.probabilities=[0.4, 0.3, 0.2, 0.1]' --out '" +
                           first.string() + "'");
  ASSERT_EQ(drawn.exit_code, 0) << drawn.err;
  const fs::path trace = first / "token_trace.csv";
  const fs::path second = dir_ / "second";
  const Result replayed =
      run("engine run " + common + " --set 'exit_policy={kind: replay, " + "token_trace: \"" +
          trace.string() + "\"}' --out '" + second.string() + "'");
  ASSERT_EQ(replayed.exit_code, 0) << replayed.err;
  // 4 requests of 8 tokens, each at the exit the first run drew.
  const std::vector<std::string> drawn_exits = exits_of(slurp(trace));
  ASSERT_EQ(drawn_exits.size(), 32U);
  EXPECT_EQ(exits_of(slurp(second / "token_trace.csv")), drawn_exits);
  // Not vacuous: the draws put tokens at several depths (32 draws over 4 exit points with
  // probability 0.4 at most each are all alike with probability below 1e-12).
  std::set<std::string> depths;
  for (const std::string& row : drawn_exits) {
    const std::size_t second_comma = row.find(',', row.find(',') + 1);
    depths.insert(row.substr(second_comma + 1, row.find(',', second_comma + 1) - second_comma - 1));
  }
  EXPECT_GT(depths.size(), 1U);
}

TEST_F(Cli, EngineRunRefusesAMissingOrForeignReplayTraceInOneLine) {
  const std::string common = random_model_and_text("Refused before any decoding. ", 100) +
                             " --set workload.requests=2 --set sync.strategy=skip_kv";
  const fs::path out = dir_ / "out";
  const fs::path absent = dir_ / "absent.csv";
  const Result missing =
      run("engine run " + common + " --set 'exit_policy={kind: replay, " + "token_trace: \"" +
          absent.string() + "\"}' --out '" + out.string() + "'");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_EQ(std::count(missing.err.begin(), missing.err.end(), '\n'), 1) << missing.err;
  EXPECT_NE(missing.err.find(absent.string()), std::string::npos) << missing.err;
  // Exit point 9 on the first row (line 3): the tiny model has fewer.
  const fs::path foreign =
      file("foreign.csv",
           "# exitsim-token-trace v1\nrequest_id,position,exit_depth,exit_point,score,policy,"
           "replica,time_ns\n0,0,6,9,,confidence,0,0\n");
  const Result other =
      run("engine run " + common + " --set 'exit_policy={kind: replay, " + "token_trace: \"" +
          foreign.string() + "\"}' --out '" + out.string() + "'");
  EXPECT_EQ(other.exit_code, 1);
  EXPECT_EQ(std::count(other.err.begin(), other.err.end(), '\n'), 1) << other.err;
  EXPECT_EQ(other.err.rfind("exitsim: error: " + foreign.string() +
                                ":3: exit_point: expected an exit point index in [0, ",
                            0),
            0U)
      << other.err;
  EXPECT_NE(other.err.find("found 9\n"), std::string::npos) << other.err;
  EXPECT_FALSE(fs::exists(out));
}

}  // namespace
