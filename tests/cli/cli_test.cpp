// End-to-end checks of the `exitsim` binary as a user runs it: exit codes, one-line errors on
// stderr, no partial output files, determinism.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "support/cli_fixture.hpp"

namespace {

using namespace cli_support;
namespace fs = std::filesystem;

TEST_F(Cli, MainJobSimulatesTheEmbeddedDefaultDeterministically) {
  const fs::path out = dir_ / "out";
  const Result first = run("simulate --out '" + out.string() + "'");
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_NE(first.out.find("scenario   default (seed 42)"), std::string::npos) << first.out;
  EXPECT_NE(first.out.find("requests        2000"), std::string::npos) << first.out;
  // Off a terminal, stderr holds progress lines only, the last one the whole workload.
  EXPECT_EQ(first.err.rfind("simulate: ", 0), 0U) << first.err;
  EXPECT_NE(first.err.find("simulate: 2000/2000 requests finished (100%)"), std::string::npos)
      << first.err;
  const std::string summary = slurp(out / "summary.json");
  EXPECT_NE(summary.find("\"schema\": \"exitsim-metrics v1\""), std::string::npos) << summary;
  EXPECT_TRUE(fs::exists(out / "requests.csv"));
  EXPECT_FALSE(fs::exists(out / "timeline.json"));  // off by default

  const fs::path again = dir_ / "again";
  const Result second = run("simulate --out '" + again.string() + "'");
  EXPECT_EQ(second.out, first.out.substr(0, first.out.rfind("outputs in")) + "outputs in " +
                            again.string() + "/\n");
  EXPECT_EQ(slurp(again / "summary.json"), summary);
  EXPECT_EQ(slurp(again / "requests.csv"), slurp(out / "requests.csv"));
  EXPECT_NE(run("simulate --no-output --set seed=43").out, run("simulate --no-output").out);
}

TEST_F(Cli, SimulateWritesATimelineWhenAsked) {
  const fs::path out = dir_ / "out";
  const Result r = run("simulate --set workload.requests=50 --set outputs.timeline=true --out '" +
                       out.string() + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string timeline = slurp(out / "timeline.json");
  EXPECT_NE(timeline.find("\"traceEvents\""), std::string::npos);
  EXPECT_NE(timeline.find("\"name\":\"prefill\""), std::string::npos);
  EXPECT_NE(timeline.find("\"ph\":\"C\""), std::string::npos);
}

// A capped trace, rejected requests and clamped lengths are said on the console and in
// summary.json; the same run without a cap replays the whole trace and says nothing.
TEST_F(Cli, SimulateStatesEverySubstitutionOnTheConsoleAndInTheSummary) {
  const fs::path trace = file("azure.csv",
                              "TIMESTAMP,ContextTokens,GeneratedTokens\n"
                              "2023-11-16 18:15:46.0000000,374,44\n"
                              "2023-11-16 18:15:46.5000000,396,109\n"
                              "2023-11-16 18:15:47.2500000,9000,5\n"
                              "2023-11-16 18:15:48.0000000,120,30\n"
                              "2023-11-16 18:15:50.0000000,91,250\n");
  const std::string replay =
      "simulate --set workload.source=trace --set workload.trace.path='" + trace.string() + "'";
  const fs::path out = dir_ / "capped";
  const Result capped = run(
      replay + " --set workload.trace.max_requests=4 --set scheduler.unservable=reject --out '" +
      out.string() + "'");
  ASSERT_EQ(capped.exit_code, 0) << capped.err;
  const std::string cap =
      "workload.trace.max_requests: replayed the first 4 of the trace's 5 "
      "requests";
  const std::string rejected = "scheduler.unservable: reject: 1 of 4 requests rejected";
  EXPECT_NE(capped.out.find("WARNING         " + cap), std::string::npos) << capped.out;
  EXPECT_NE(capped.out.find(rejected), std::string::npos) << capped.out;
  const std::string summary = slurp(out / "summary.json");
  EXPECT_NE(summary.find(cap), std::string::npos);
  EXPECT_NE(summary.find(rejected), std::string::npos);
  EXPECT_NE(summary.find("\"requests\": 3,"), std::string::npos);

  const Result whole = run(replay + " --no-output");
  // The 9,000-token prompt exceeds the 8,192-token budget and llama-3-8b's window: refused.
  EXPECT_EQ(whole.exit_code, 1);
  EXPECT_NE(whole.err.find("request 2 cannot be served"), std::string::npos) << whole.err;
  const Result chunked = run(replay +
                             " --no-output --set scheduler.kind=chunked_prefill"
                             " --set model.max_context=0");
  ASSERT_EQ(chunked.exit_code, 0) << chunked.err;
  EXPECT_NE(chunked.out.find("requests        5 "), std::string::npos) << chunked.out;
  EXPECT_EQ(chunked.out.find("WARNING"), std::string::npos) << chunked.out;
}

TEST_F(Cli, FailedSimulationLeavesNoOutputBehind) {
  const fs::path out = dir_ / "out";
  const Result r = run("simulate --set scheduler.kv_blocks=4 --out '" + out.string() + "'");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err.rfind("exitsim: error: workload: request 0 cannot be served by replica 0", 0), 0u)
      << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1);
  EXPECT_FALSE(fs::exists(out));
}

TEST_F(Cli, ScenarioShowOutputLoadsBackToTheSameScenario) {
  const Result shown = run("scenario show --set scheduler.max_running=64");
  ASSERT_EQ(shown.exit_code, 0) << shown.err;
  EXPECT_NE(shown.out.find("max_running: 64"), std::string::npos);
  const fs::path saved = file("resolved.yaml", shown.out);
  const Result again = run("scenario show '" + saved.string() + "'");
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(again.out, shown.out);
}

TEST_F(Cli, EveryExampleScenarioResolves) {
  for (const auto& entry : fs::directory_iterator(fs::path(EXITSIM_SOURCE_DIR) / "scenarios")) {
    if (entry.path().extension() != ".yaml")
      continue;
    const Result r = run("scenario show '" + entry.path().string() + "'");
    EXPECT_EQ(r.exit_code, 0) << entry.path() << ": " << r.err;
  }
  ::setenv("EXITSIM_TRACES", "/traces", 0);  // the trace examples name their folder by it
  for (const auto& entry :
       fs::directory_iterator(fs::path(EXITSIM_SOURCE_DIR) / "scenarios" / "examples")) {
    if (entry.path().extension() != ".yaml")
      continue;  // data files live beside the scenarios
    const Result r = run("scenario show '" + entry.path().string() + "'");
    EXPECT_EQ(r.exit_code, 0) << entry.path() << ": " << r.err;
  }
}

TEST_F(Cli, UserErrorsAreOneLineWithExitCodeOne) {
  const Result bad_key = run("scenario show --set scheduler.max_runing=3");
  EXPECT_EQ(bad_key.exit_code, 1);
  EXPECT_EQ(bad_key.out, "");
  EXPECT_EQ(bad_key.err,
            "exitsim: error: --set: scheduler.max_runing: unknown key \"max_runing\"; did you "
            "mean \"max_running\"?\n");

  const Result missing = run("trace inspect '" + (dir_ / "absent.csv").string() + "'");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_EQ(missing.err, "exitsim: error: " + (dir_ / "absent.csv").string() +
                             ": cannot open request trace: No such file or directory\n");

  const Result bad_format = run("trace inspect x.csv --format azur");
  EXPECT_EQ(bad_format.exit_code, 1);
  EXPECT_EQ(bad_format.err,
            "exitsim: error: --format: expected one of auto, azure, vidur, mooncake, burstgpt, "
            "native, tracev2, csv, sharegpt, found \"azur\"; did you mean \"azure\"?\n");
}

TEST_F(Cli, UsageErrorsExitWithTwo) {
  EXPECT_EQ(run("").exit_code, 2);
  EXPECT_EQ(run("trace inspect").exit_code, 2);
  EXPECT_EQ(run("run --no-such-flag").exit_code, 2);
}

TEST_F(Cli, InspectPrintsCountsSpanRateAndPercentiles) {
  const fs::path trace = file("t.csv",
                              "TIMESTAMP,ContextTokens,GeneratedTokens\r\n"
                              "2023-11-16 18:00:00.0000000,100,10\r\n"
                              "2023-11-16 18:00:01.0000000,200,20\r\n"
                              "2023-11-16 18:00:02.0000000,300,30");
  const Result r = run("trace inspect '" + trace.string() + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("format              azure"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("requests            3"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("span                2.000 s"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("mean rate           1.000 req/s"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("inter-arrival CV    0.000"), std::string::npos) << r.out;
}

TEST_F(Cli, ConvertWritesNativeAndLeavesNothingBehindOnError) {
  const fs::path good = file("good.csv",
                             "TIMESTAMP,ContextTokens,GeneratedTokens\n"
                             "2023-11-16 18:00:00.0000000,100,10\n"
                             "2023-11-16 18:00:00.5000000,200,20\n");
  const fs::path out = dir_ / "native.csv";
  const Result ok = run("trace convert '" + good.string() + "' --out '" + out.string() + "'");
  ASSERT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_EQ(slurp(out),
            "# exitsim-requests v1\n"
            "request_id,arrival_ns,input_tokens,output_tokens\n"
            "0,0,100,10\n"
            "1,500000000,200,20\n");
  // Converting the native file again gives the same bytes.
  const fs::path again = dir_ / "again.csv";
  ASSERT_EQ(run("trace convert '" + out.string() + "' -o '" + again.string() + "'").exit_code, 0);
  EXPECT_EQ(slurp(again), slurp(out));

  // The malformed row comes after a good one: the writer has started, yet no file may remain.
  const fs::path bad = file("bad.csv",
                            "TIMESTAMP,ContextTokens,GeneratedTokens\n"
                            "2023-11-16 18:00:00.0000000,100,10\n"
                            "2023-11-16 18:00:01.0000000,abc,20\n");
  const fs::path failed = dir_ / "failed.csv";
  const Result r = run("trace convert '" + bad.string() + "' --out '" + failed.string() + "'");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "exitsim: error: " + bad.string() +
                       ":3:29: ContextTokens: expected an integer token count, found \"abc\"\n");
  EXPECT_FALSE(fs::exists(failed));
  // Nothing but the inputs and the captured output is left in the folder: no temporary file.
  for (const fs::directory_entry& entry : fs::directory_iterator(dir_))
    EXPECT_EQ(entry.path().string().find(".exitsim-"), std::string::npos) << entry.path();

  const Result skipping =
      run("trace convert '" + bad.string() + "' --skip-bad-rows --out '" + failed.string() + "'");
  EXPECT_EQ(skipping.exit_code, 0) << skipping.err;
  EXPECT_NE(skipping.out.find("skipped 1 rows"), std::string::npos) << skipping.out;
}

TEST_F(Cli, ConvertWritesBlisTraceV2AndSaysWhatItRounded) {
  const fs::path good = file("good.csv",
                             "TIMESTAMP,ContextTokens,GeneratedTokens\n"
                             "2024-05-10 00:00:00+00:00,100,10\n"
                             "2024-05-10 05:30:00.0000015+05:30,200,20\n");
  const fs::path out = dir_ / "blis.csv";
  const Result ok =
      run("trace convert '" + good.string() + "' --to tracev2 --out '" + out.string() + "'");
  ASSERT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_EQ(ok.out, "wrote 2 requests to " + out.string() + " and its header " +
                        (dir_ / "blis.yaml").string() +
                        " (tracev2 format)\nWARNING    1 arrivals rounded to the nearest "
                        "microsecond (TraceV2's unit)\n");
  EXPECT_EQ(slurp(dir_ / "blis.yaml"),
            "trace_version: 2\ntime_unit: us\nmode: generated\nwarm_up_requests: 0\n");
  const std::string data = slurp(out);
  // 1.5 us rounds half up to 2.
  EXPECT_NE(data.find("\n1,,,,,0,,0,false,200,20,0,0,0,0,0,,0,0,2,2,0,0,0,,,\n"), std::string::npos)
      << data;
  const Result bad_to = run("trace convert '" + good.string() + "' --to blis --out '" +
                            (dir_ / "x.csv").string() + "'");
  EXPECT_EQ(bad_to.exit_code, 2) << bad_to.err;
  EXPECT_FALSE(fs::exists(dir_ / "x.csv"));
}

TEST_F(Cli, OpTraceConvertsToChromeJson) {
  const fs::path ops = file("ops.csv",
                            "# exitsim-op-trace v1\n"
                            "name,kind,device,stream,start_ns,duration_ns,batch_tokens,"
                            "context_tokens,depth,recursion,step_id,correlation_id\n"
                            "mlp.up,gemm,cpu,0,1000,2500,8,512,3,0,1,7\n"
                            "attn.decode,attention,cpu,0,4000,1200,8,512,3,0,1,8\n");
  const fs::path json = dir_ / "trace.json";
  const Result r = run("trace chrome '" + ops.string() + "' --out '" + json.string() + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string text = slurp(json);
  EXPECT_NE(text.find("\"traceEvents\""), std::string::npos);
  EXPECT_NE(text.find("\"ts\":1.000"), std::string::npos) << text;
  EXPECT_NE(text.find("\"dur\":2.500"), std::string::npos) << text;
}

}  // namespace

namespace {

// One grammar: -o/--out names every output; the old spellings still work for one release and say
// what replaces them.
TEST_F(Cli, OldSpellingsWorkWithAOneLineHint) {
  const fs::path out = dir_ / "short_o";
  const Result simulated = run("simulate --set workload.requests=5 -o '" + out.string() + "'");
  ASSERT_EQ(simulated.exit_code, 0) << simulated.err;
  EXPECT_TRUE(fs::exists(out / "summary.json"));
  const fs::path grid = file("grid.csv", "");
  const Result renamed =
      run("calibrate '" + grid.string() + "' --output '" + (dir_ / "p.json").string() + "'");
  // The hint comes first, then the command runs as before (here it refuses the empty grid).
  EXPECT_EQ(renamed.err.rfind("exitsim: note: --output is now -o/--out; the old spelling goes in "
                              "the next release\n",
                              0),
            0U)
      << renamed.err;
  EXPECT_EQ(std::count(renamed.err.begin(), renamed.err.end(), '\n'), 2) << renamed.err;
  const Result missing = run("calibrate '" + grid.string() + "'");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_EQ(missing.err, "exitsim: error: --out: expected the cost profile to write, found none\n");
  const Result help = run("engine run --help");
  EXPECT_NE(help.out.find("--profile-dir"), std::string::npos) << help.out;
  EXPECT_EQ(help.out.find("--profile "), std::string::npos) << help.out;  // hidden
  EXPECT_NE(help.out.find("--temperature FLOAT:NONNEGATIVE=0"), std::string::npos) << help.out;
  const Result version = run("--version");
  EXPECT_EQ(version.out.rfind("exitsim 0.1.0 (commit ", 0), 0U) << version.out;
}

TEST_F(Cli, UnusableOutputDirectoryIsAUserError) {
  const fs::path blocker = file("a_file", "not a directory");
  const Result r = run("simulate --set workload.requests=5 --out '" + blocker.string() + "'");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "exitsim: error: " + blocker.string() +
                       ": --out: expected a directory that can be created, found a file\n");
}

}  // namespace

namespace {

// The engine end to end: a random model directory, a text for prompts, a decode with its token
// trace and op trace, a quality table the simulator then reads.
TEST_F(Cli, EngineRunsAModelAndItsQualityTableFeedsTheSimulator) {
  const std::string common =
      random_model_and_text("In the beginning the simulator and the engine agreed. ", 400);
  const std::string workload =
      " --set workload.requests=4 --set 'workload.input_tokens={dist: fixed, value: 24}'"
      " --set 'workload.output_tokens={dist: fixed, value: 10}' --set exit_policy.kind=distribution"
      " --set 'exit_policy.probabilities=[0.4, 0.3, 0.2, 0.1]' --set sync.strategy=depthwise";
  const fs::path out = dir_ / "out";
  const fs::path profile = dir_ / "profile";
  const Result r = run("engine run " + common + workload + " --out '" + out.string() +
                       "' --profile-dir '" + profile.string() + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("40 output tokens"), std::string::npos) << r.out;
  const std::string tokens = slurp(out / "token_trace.csv");
  EXPECT_EQ(std::count(tokens.begin(), tokens.end(), '\n'), 2 + 40);
  EXPECT_NE(slurp(profile / "op_trace.csv").find("attention,attention,cpu"), std::string::npos);
  EXPECT_NE(slurp(profile / "op_trace.json").find("\"traceEvents\""), std::string::npos);
  EXPECT_EQ(slurp(profile / "steps.csv").rfind("step_id,start_ns,prefill_request_ids,", 0), 0u);

  // Calibrate from that trace, validate on other requests (another seed) against the engine.
  // --force: this test is about the commands' plumbing, and under a parallel test run the
  // engine's timings are those of a busy machine, which calibrate refuses as absurd otherwise.
  const fs::path costs = dir_ / "costs.json";
  const Result calibrated = run("calibrate '" + (profile / "op_trace.csv").string() + "' -o '" +
                                costs.string() + "' --force");
  ASSERT_EQ(calibrated.exit_code, 0) << calibrated.err;
  EXPECT_NE(calibrated.out.find("held-out MAPE"), std::string::npos) << calibrated.out;
  EXPECT_NE(slurp(costs).find("\"format\": \"exitsim-cost-profile v1\""), std::string::npos);
  const fs::path validation = dir_ / "validation";
  const Result validated =
      run("validate " + common + workload +
          " --set seed=9 --set workload.arrivals.rate=1000 --profile '" + costs.string() +
          "' --strategies depthwise,full_depth --repeat 2 -o '" + validation.string() + "'");
  ASSERT_EQ(validated.exit_code, 0) << validated.err;
  EXPECT_NE(validated.out.find("depthwise: iterations engine"), std::string::npos) << validated.out;
  // Two engine runs per strategy: each figure with the engine's range and CV, judged, and the
  // speed probe compared with the profile's.
  EXPECT_NE(validated.out.find(" cv "), std::string::npos) << validated.out;
  EXPECT_NE(validated.out.find("(target 5%"), std::string::npos) << validated.out;
  EXPECT_NE(validated.out.find("speed probe"), std::string::npos) << validated.out;
  const std::string json = slurp(validation / "validation.json");
  EXPECT_NE(json.find("\"repeats\": 2"), std::string::npos) << json;
  EXPECT_NE(json.find("\"engine_min\""), std::string::npos);
  EXPECT_NE(json.find("\"queueing_p50_ms\""), std::string::npos);
  // Both strategies also price the engine's own steps, from the plan each step recorded.
  const std::string priced = "the engine's own batches priced by the profile";
  const std::size_t first = validated.out.find(priced);
  ASSERT_NE(first, std::string::npos) << validated.out;
  EXPECT_NE(validated.out.find(priced, first + 1), std::string::npos) << validated.out;
  EXPECT_EQ(validated.out.find("not recorded"), std::string::npos) << validated.out;
  EXPECT_NE(slurp(validation / "validation.csv").find("depthwise,throughput_tokens_per_s,"),
            std::string::npos);
  // A profile measured on other hardware is refused, in one line naming the key.
  std::string foreign = slurp(costs);
  const std::size_t at = foreign.find("\"hardware\": \"") + 13;
  foreign.insert(at, "another machine, ");
  const fs::path foreign_costs = file("foreign.json", foreign);
  const Result other_hardware = run("validate " + common + workload + " --profile '" +
                                    foreign_costs.string() + "' -o '" + validation.string() + "'");
  EXPECT_EQ(other_hardware.exit_code, 1);
  EXPECT_NE(other_hardware.err.find("source.hardware: expected this machine"), std::string::npos)
      << other_hardware.err;
  EXPECT_NE(other_hardware.err.find("found \"another machine, "), std::string::npos)
      << other_hardware.err;
  // --normalize-speed rescales the engine's times by the profile's probe over today's: with a
  // profile of a machine three times slower every engine time is stretched about 3x, which ran
  // into an internal error while step starts were left unscaled (steps overlapped). The run
  // completes and says that it normalized, on the console and in validation.json.
  std::string slower = slurp(costs);
  const std::size_t probe_at = slower.find("\"speed_probe_us\": ");
  ASSERT_NE(probe_at, std::string::npos) << slower;
  const std::size_t value_at = probe_at + 18;
  const std::size_t value_end = slower.find_first_of(",\n}", value_at);
  const double probe = std::stod(slower.substr(value_at, value_end - value_at));
  slower.replace(value_at, value_end - value_at, fmt::format("{}", 3 * probe));
  const Result normalized = run(
      "validate " + common + workload + " --profile '" + file("slower.json", slower).string() +
      "' --strategies full_depth --normalize-speed -o '" + (dir_ / "normalized").string() + "'");
  ASSERT_EQ(normalized.exit_code, 0) << normalized.err;
  EXPECT_NE(normalized.out.find("engine times normalized to calibration speed (x"),
            std::string::npos)
      << normalized.out;
  EXPECT_NE(slurp(dir_ / "normalized" / "validation.json").find("\"normalized\": true"),
            std::string::npos);
  // So is one measured by another build (a debug build times the engine several times slower).
  std::string other_build = slurp(costs);
  const std::size_t build_at = other_build.find("\"build\": \"");
  ASSERT_NE(build_at, std::string::npos) << other_build;
  other_build.insert(build_at + 10, "debug of ");
  const Result refused_build =
      run("validate " + common + workload + " --profile '" +
          file("other_build.json", other_build).string() + "' -o '" + validation.string() + "'");
  EXPECT_EQ(refused_build.exit_code, 1);
  EXPECT_NE(refused_build.err.find("source.build: expected this build"), std::string::npos)
      << refused_build.err;

  // Same scenario and seed: the same tokens at the same depths (times are wall-clock).
  const fs::path again = dir_ / "again";
  ASSERT_EQ(run("engine run " + common + workload + " --out '" + again.string() + "'").exit_code,
            0);
  // time_ns is the 8th of the token trace's columns (the adaptive threshold's two follow it).
  const auto without_times = [](const std::string& trace) {
    std::string kept;
    std::istringstream lines(trace);
    for (std::string line; std::getline(lines, line);) {
      std::size_t start = 0;
      for (int field = 0; field < 7 && start != std::string::npos; ++field)
        start = line.find(',', start) + 1;
      const std::size_t end = line.find(',', start);
      kept += line.substr(0, start) + (end == std::string::npos ? "" : line.substr(end)) + "\n";
    }
    return kept;
  };
  EXPECT_EQ(without_times(slurp(again / "token_trace.csv")), without_times(tokens));

  const fs::path table = dir_ / "quality.csv";
  const Result eval = run("engine eval " + common +
                          " --thresholds 0.02,0.05 --oracle --strategies skip_kv,state_copy"
                          " --context 16"
                          " --window 32 --max-windows 4 -o '" +
                          table.string() + "'");
  ASSERT_EQ(eval.exit_code, 0) << eval.err;
  EXPECT_EQ(slurp(table).rfind("# exitsim-quality-table v2\n", 0), 0u);
  // Every setting under each strategy asked for, the reference once.
  EXPECT_NE(slurp(table).find("\noracle,state_copy,,,,"), std::string::npos) << slurp(table);
  EXPECT_NE(slurp(table).find("\nconfidence,skip_kv,top1,0.05,"), std::string::npos);
  EXPECT_NE(slurp(table).find("\nconfidence,state_copy,top1,0.05,"), std::string::npos);
  // The oracle is simulated from its measured row, on the measured model's shape.
  const Result oracle =
      run("simulate --no-output --set model.preset=mor-smollm-360m-r4 --set workload.requests=20"
          " --set workload.input_tokens.max=1536 --set workload.output_tokens.max=512"
          " --set exit_policy.kind=oracle --set sync.strategy=state_copy"
          " --set exit_policy.threshold_table='" +
          table.string() + "'");
  EXPECT_EQ(oracle.exit_code, 0) << oracle.err;
  EXPECT_NE(oracle.out.find("mean exit depth"), std::string::npos) << oracle.out;
  const Result sim =
      run("simulate --no-output --set model.preset=mor-smollm-360m-r4 --set workload.requests=20"
          " --set workload.input_tokens.max=1536 --set workload.output_tokens.max=512"
          " --set exit_policy.kind=confidence --set exit_policy.threshold=0.03"
          " --set sync.strategy=skip_kv"
          " --set exit_policy.threshold_table='" +
          table.string() + "'");
  EXPECT_EQ(sim.exit_code, 0) << sim.err;
}

// A peak or bandwidth so small that an iteration takes days (or forever) was priced as a wrapped
// int64: 1e-300 TFLOP/s gave a TTFT of 0 ms and exit 0. Such prices are refused naming the keys;
// the smallest peak that still prices under the cap runs.
TEST_F(Cli, IterationPricesPastTheCapAreRefusedNotWrapped) {
  for (const std::string key :
       {"hardware.peak_tflops.bf16=1e-300", "hardware.memory_bandwidth_gbps=1e-300",
        "cost_model.flops_efficiency=1e-300"}) {
    const Result r = run("simulate --no-output --set workload.requests=5 --set " + key);
    EXPECT_EQ(r.exit_code, 1) << key;
    EXPECT_EQ(r.err.rfind("exitsim: error: hardware: expected iteration prices under 1e+09 us, "
                          "found ",
                          0),
              0U)
        << r.err;
    EXPECT_NE(r.err.find("hardware.peak_tflops, hardware.memory_bandwidth_gbps or "
                         "cost_model.*_efficiency is far too small"),
              std::string::npos)
        << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
  // 1 TFLOP/s: slow (an 8B model's prefill takes seconds) but priced, so it runs.
  const Result slow =
      run("simulate --no-output --set workload.requests=5 --set hardware.peak_tflops.bf16=1");
  EXPECT_EQ(slow.exit_code, 0) << slow.err;
}

// Finding N14: `engine eval --thresholds nan` evaluated for 45 s before refusing the value. Every
// setting is now checked before the first token is scored: stderr is the refusal alone (no
// progress line, which the evaluation prints as it scores), naming the option, and no table is
// written. A good setting beside the bad one does not hide it.
TEST_F(Cli, EngineEvalRefusesABadSettingBeforeEvaluating) {
  const std::string common = random_model_and_text("Settings are checked first. ", 40);
  const fs::path table = dir_ / "quality.csv";
  for (const auto& [option, found] :
       {std::pair{std::string("--thresholds 0.5,nan"), std::string("--thresholds: expected a "
                                                                   "finite number, found nan")},
        std::pair{std::string("--router-thresholds inf"),
                  std::string("--router-thresholds: expected a finite number, found inf")}}) {
    const Result refused = run("engine eval " + common + " " + option +
                               " --context 16 --window 32 -o '" + table.string() + "'");
    EXPECT_EQ(refused.exit_code, 1) << refused.err;
    EXPECT_EQ(refused.err, "exitsim: error: " + found + "\n");
    EXPECT_FALSE(fs::exists(table));
  }
  // The same command with good values evaluates (and prints its progress as it scores).
  const Result evaluated =
      run("engine eval " + common +
          " --thresholds 0.5 --context 16 --window 32 --max-windows 2 -o '" + table.string() + "'");
  ASSERT_EQ(evaluated.exit_code, 0) << evaluated.err;
  EXPECT_NE(evaluated.err.find("tokens scored"), std::string::npos) << evaluated.err;
  EXPECT_TRUE(fs::exists(table));
}

// `engine profile-ops` writes an op grid with its run description; calibrate fits every layer op
// from it, in both call shapes, and says the residual is unmeasured. A grid of noise (the same
// file with its medians scrambled across two orders of magnitude) is refused in one line, and no
// profile is written.
TEST_F(Cli, ProfileOpsGridCalibratesAndAGridOfNoiseIsRefused) {
  const std::string common = random_model_and_text("A grid of shapes. ", 20);
  const std::string model = common.substr(0, common.find(" --text"));
  const fs::path grid = dir_ / "ops.csv";
  const Result r = run("engine profile-ops " + model +
                       " --threads 1 --batch-tokens 1,2,4,8,16,32 --contexts 16,64,128 "
                       "--repetitions 3 --rounds 1 -o '" +
                       grid.string() + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("speed      probe"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("widest p10-p90"), std::string::npos) << r.out;
  const std::string rows = slurp(grid);
  EXPECT_EQ(rows.rfind("# exitsim-op-grid v1\nop,kind,shape,", 0), 0U);
  EXPECT_NE(rows.find("qkv_proj,gemm,prefill,"), std::string::npos);
  EXPECT_NE(slurp(dir_ / "ops.run.json").find("\"speed_probe\""), std::string::npos);

  const fs::path costs = dir_ / "costs.json";
  const Result calibrated = run("calibrate '" + grid.string() + "' -o '" + costs.string() + "'");
  ASSERT_EQ(calibrated.exit_code, 0) << calibrated.err;
  EXPECT_NE(calibrated.out.find("qkv_proj.prefill"), std::string::npos) << calibrated.out;
  EXPECT_NE(calibrated.out.find("no op trace given: the step residual"), std::string::npos);
  EXPECT_NE(slurp(costs).find("\"measured_by\": \"grid\""), std::string::npos);

  // Every row's times replaced by a value drawn across 1..1000 us (a deterministic scramble).
  std::string noise;
  std::istringstream lines(rows);
  std::string line;
  for (int n = 0; std::getline(lines, line); ++n) {
    if (n < 2) {
      noise += line + "\n";
      continue;
    }
    const double us = 1 + static_cast<double>((n * 7919) % 1000);
    // The first 8 fields (op ... repetitions) stay; the 5 times become `us`.
    std::size_t cut = 0;
    for (int field = 0; field < 8; ++field)
      cut = line.find(',', cut) + 1;
    noise += line.substr(0, cut) + fmt::format("{0},{0},{0},{0},{0}\n", us);
  }
  const fs::path noisy = dir_ / "noise.csv";
  file("noise.csv", noise);
  fs::copy_file(dir_ / "ops.run.json", dir_ / "noise.run.json");
  const fs::path refused = dir_ / "refused.json";
  const Result absurd = run("calibrate '" + noisy.string() + "' -o '" + refused.string() + "'");
  EXPECT_EQ(absurd.exit_code, 1);
  EXPECT_NE(absurd.err.find("expected timings of one steady machine"), std::string::npos)
      << absurd.err;
  EXPECT_EQ(std::count(absurd.err.begin(), absurd.err.end(), '\n'), 1) << absurd.err;
  EXPECT_FALSE(fs::exists(refused));
}

// The engine's thread count is the user's (--threads), recorded in the profile's hardware name;
// validating on another thread count than the profile's is refused in one line.
TEST_F(Cli, EngineThreadCountIsRecordedAndAProfileOfAnotherIsRefused) {
  const std::string common = random_model_and_text("Threads are part of the hardware. ", 200) +
                             " --set workload.requests=4 --set 'workload.input_tokens={dist: "
                             "fixed, value: 24}' --set 'workload.output_tokens={dist: fixed, "
                             "value: 10}'";
  const fs::path profile = dir_ / "profile";
  const Result r = run("engine run " + common + " --threads 1 --pin --out '" +
                       (dir_ / "out").string() + "' --profile-dir '" + profile.string() + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const fs::path costs = dir_ / "costs.json";
  ASSERT_EQ(run("calibrate '" + (profile / "op_trace.csv").string() + "' -o '" + costs.string() +
                "' --force")  // about the hardware name, not the timings (see above)
                .exit_code,
            0);
  EXPECT_NE(slurp(costs).find(" x 1 thread, pinned\""), std::string::npos) << slurp(costs);
  const Result other = run("validate " + common + " --threads 2 --profile '" + costs.string() +
                           "' -o '" + (dir_ / "validation").string() + "'");
  EXPECT_EQ(other.exit_code, 1);
  EXPECT_EQ(std::count(other.err.begin(), other.err.end(), '\n'), 1) << other.err;
  EXPECT_NE(other.err.find("2 threads"), std::string::npos) << other.err;
  EXPECT_FALSE(fs::exists(dir_ / "validation"));
  const Result negative = run("engine run " + common + " --threads -1 --no-output");
  EXPECT_EQ(negative.exit_code, 1);
  EXPECT_NE(negative.err.find("--threads"), std::string::npos) << negative.err;
}

TEST_F(Cli, EngineUserErrorsAreOneLine) {
  const fs::path corpus = file("corpus.txt", std::string(500, 'a'));
  const Result missing =
      run("engine run --model '" + (dir_ / "nope").string() + "' --text '" + corpus.string() + "'");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_EQ(std::count(missing.err.begin(), missing.err.end(), '\n'), 1) << missing.err;
  const fs::path model = dir_ / "model";
  ASSERT_EQ(run("engine random-model -o '" + model.string() + "'").exit_code, 0);
  const Result no_text = run("engine run --model '" + model.string() + "'");
  EXPECT_EQ(no_text.exit_code, 1);
  EXPECT_NE(no_text.err.find("--text"), std::string::npos) << no_text.err;
  const Result bad_exits =
      run("engine run --model '" + model.string() + "' --text '" + corpus.string() +
          "' --set exit_policy.kind=distribution --set 'exit_policy.probabilities=[0.5, 0.5]'");
  EXPECT_EQ(bad_exits.exit_code, 1);
  EXPECT_NE(bad_exits.err.find("exit_policy.probabilities"), std::string::npos) << bad_exits.err;
  const Result half_on_cpu = run("engine run --model '" + model.string() + "' --text '" +
                                 corpus.string() + "' --dtype bf16");
  EXPECT_EQ(half_on_cpu.exit_code, 1);
  EXPECT_EQ(std::count(half_on_cpu.err.begin(), half_on_cpu.err.end(), '\n'), 1) << half_on_cpu.err;
  EXPECT_NE(half_on_cpu.err.find("--dtype"), std::string::npos) << half_on_cpu.err;
  // What only the simulator models is refused, never run as something else.
  const Result refused = run("engine run --model '" + model.string() + "' --text '" +
                             corpus.string() + "' --set scheduler.prefix_caching=true --no-output");
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_EQ(refused.err,
            "exitsim: error: scheduler.prefix_caching: expected false for the engine (prefix "
            "caching is modelled by the simulator only so far), found true\n");
}

// Swap preemption runs in the engine (CPU backend: a host tier of K/V blocks) and says what it
// moved, and what it recomputed when the tier was too small.
TEST_F(Cli, EngineRunSwapsPreemptedSequencesToTheHostTier) {
  const fs::path corpus = file("corpus.txt", std::string(500, 'a'));
  const fs::path model = dir_ / "model";
  ASSERT_EQ(run("engine random-model -o '" + model.string() + "'").exit_code, 0);
  const std::string squeezed =
      "engine run --model '" + model.string() + "' --text '" + corpus.string() +
      "' --set scheduler.preemption=swap --set workload.requests=8 --set "
      "workload.input_tokens.dist=fixed --set workload.input_tokens.value=32 --set "
      "workload.output_tokens.dist=fixed --set workload.output_tokens.value=32 --set "
      "scheduler.kv_blocks=12 --set scheduler.block_size=8 --no-output";
  const Result swapped = run(squeezed);
  ASSERT_EQ(swapped.exit_code, 0) << swapped.err;
  int victims = -1, recomputed = -1;
  const std::size_t at = swapped.out.find("swap       ");
  ASSERT_NE(at, std::string::npos) << swapped.out;
  ASSERT_EQ(std::sscanf(swapped.out.c_str() + at, "swap       %d victims", &victims), 1);
  EXPECT_GT(victims, 0) << swapped.out;
  EXPECT_NE(swapped.out.find(", 0 recomputed instead"), std::string::npos) << swapped.out;
  const Result full = run(squeezed + " --set hardware.host_swap_gb=0");
  ASSERT_EQ(full.exit_code, 0) << full.err;
  const std::size_t line = full.out.find("swap       0 victims to the host tier of 0 blocks");
  ASSERT_NE(line, std::string::npos) << full.out;
  ASSERT_EQ(std::sscanf(full.out.c_str() + full.out.find("back), ", line), "back), %d recomputed",
                        &recomputed),
            1);
  EXPECT_EQ(recomputed, victims) << full.out;
}

TEST_F(Cli, SweepKilledMidwayResumesWithoutLosingOrRepeatingRuns) {
  const fs::path scenario = file("sweep.yaml",
                                 "workload:\n  requests: 300\n"
                                 "sweep:\n"
                                 "  - key: scheduler.max_running\n    values: [2, 4, 8, 16]\n"
                                 "  - key: workload.arrivals.rate\n    values: [1, 2, 4, 8]\n");
  const fs::path db = dir_ / "runs.db";
  const std::string sweep = "sweep '" + scenario.string() + "' --db '" + db.string() + "' -j 1";
  // kill -9 part-way (or after the end, on a fast machine: then nothing is left to resume).
  const std::string killed =
      "timeout -s KILL 0.4 '" + std::string(EXITSIM_CLI_PATH) + "' " + sweep + " >/dev/null 2>&1";
  [[maybe_unused]] const int status = std::system(killed.c_str());
  const Result resumed = run(sweep);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  int made = -1;
  int already = -1;
  ASSERT_EQ(
      std::sscanf(resumed.out.c_str(), "sweep      %d runs made, %d already", &made, &already), 2)
      << resumed.out;
  EXPECT_EQ(made + already, 16) << resumed.out;
  const Result again = run(sweep);
  EXPECT_NE(again.out.find("0 runs made, 16 already"), std::string::npos) << again.out;
  const Result bad_shard = run(sweep + " --shard 2/2");
  EXPECT_EQ(bad_shard.exit_code, 1);
  EXPECT_NE(bad_shard.err.find("--shard: expected i/N"), std::string::npos) << bad_shard.err;
}

TEST_F(Cli, ReportRendersInHeadlessChromium) {
  const fs::path scenario = file("sweep.yaml",
                                 "workload:\n  requests: 60\n"
                                 "sweep:\n"
                                 "  - key: scheduler.max_running\n    values: [4, 32]\n");
  const fs::path db = dir_ / "runs.db";
  ASSERT_EQ(run("sweep '" + scenario.string() + "' --db '" + db.string() + "'").exit_code, 0);
  const fs::path html = dir_ / "report" / "report.html";
  const Result report = run("report --db '" + db.string() + "' -o '" + html.string() + "'");
  ASSERT_EQ(report.exit_code, 0) << report.err;
  EXPECT_NE(report.out.find("note       no quality table"), std::string::npos) << report.out;
  EXPECT_TRUE(fs::exists(dir_ / "report" / "report.json"));
  EXPECT_TRUE(fs::exists(dir_ / "report" / "report_frontier.csv"));
  if (!fs::exists("/usr/bin/chromium"))
    GTEST_SKIP() << "headless Chromium is not installed (apt-get install chromium): the report "
                    "was written but not rendered";
  const fs::path png = dir_ / "report.png";
  const std::string command =
      "timeout 120 /usr/bin/chromium --headless --no-sandbox --disable-gpu "
      "--window-size=1000,2000 --screenshot='" +
      png.string() + "' 'file://" + html.string() + "' >/dev/null 2>&1";
  ASSERT_EQ(std::system(command.c_str()), 0);
  // A rendered page of charts, not a blank one: a blank 1000x2000 PNG compresses to ~10 KB.
  ASSERT_TRUE(fs::exists(png));
  EXPECT_GT(fs::file_size(png), 40'000U);
}

// A rank that cannot read the sweep tells the others, and every rank stops with an error instead
// of waiting for it (rank 0's failure to create the database used to leave rank 1 in a barrier
// for ever). `timeout` turns a hang into a failure.
TEST_F(Cli, SweepOverMpiRanksStopsEveryRankWhenOneCannotReadTheDatabase) {
  if (std::system("command -v mpirun >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "mpirun is not installed (apt-get install openmpi-bin libopenmpi-dev)";
  const fs::path scenario = file("sweep.yaml",
                                 "workload:\n  requests: 20\n"
                                 "sweep:\n  - key: scheduler.max_running\n    values: [2, 8]\n");
  const fs::path out = dir_ / "mpi.txt";
  const std::string mpirun =
      "ASAN_OPTIONS=detect_leaks=0 timeout 120 mpirun -x ASAN_OPTIONS --allow-run-as-root "
      "--oversubscribe -np 2 '" +
      std::string(EXITSIM_CLI_PATH) + "' sweep '" + scenario.string() + "' --db '" +
      (dir_ / "missing" / "mpi.db").string() + "' >'" + out.string() + "' 2>&1";
  const int status = std::system(mpirun.c_str());
  ASSERT_NE(status, 0) << slurp(out);
  EXPECT_NE(WEXITSTATUS(status), 124) << "the ranks hung: " << slurp(out);
  EXPECT_NE(slurp(out).find("expected a writable SQLite database"), std::string::npos)
      << slurp(out);
}

TEST_F(Cli, SweepRunsOverTwoMpiRanks) {
  if (std::system("command -v mpirun >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "mpirun is not installed (apt-get install openmpi-bin libopenmpi-dev)";
  const fs::path scenario = file("sweep.yaml",
                                 "workload:\n  requests: 100\n"
                                 "sweep:\n"
                                 "  - key: scheduler.max_running\n    values: [2, 8, 32]\n"
                                 "  - key: workload.arrivals.rate\n    values: [2, 8]\n");
  const fs::path db = dir_ / "mpi.db";
  const fs::path out = dir_ / "mpi.txt";
  // OpenMPI's own allocations outlive MPI_Finalize: not ours to report under LeakSanitizer.
  const std::string mpirun =
      "ASAN_OPTIONS=detect_leaks=0 mpirun -x ASAN_OPTIONS --allow-run-as-root --oversubscribe "
      "-np 2 '" +
      std::string(EXITSIM_CLI_PATH) + "' sweep '" + scenario.string() + "' --db '" + db.string() +
      "' >'" + out.string() + "' 2>&1";
  ASSERT_EQ(std::system(mpirun.c_str()), 0) << slurp(out);
  EXPECT_NE(slurp(out).find("6 runs made, 0 already"), std::string::npos) << slurp(out);
  EXPECT_NE(slurp(out).find("over MPI ranks"), std::string::npos) << slurp(out);
  // The same sweep without MPI finds every run there, and the numbers match a threaded sweep's.
  const Result again = run("sweep '" + scenario.string() + "' --db '" + db.string() + "'");
  EXPECT_NE(again.out.find("0 runs made, 6 already"), std::string::npos) << again.out;
  const fs::path threaded = dir_ / "threaded.db";
  ASSERT_EQ(run("sweep '" + scenario.string() + "' --db '" + threaded.string() + "'").exit_code, 0);
  const fs::path a = dir_ / "a.html";
  const fs::path b = dir_ / "b.html";
  ASSERT_EQ(run("report --db '" + db.string() + "' -o '" + a.string() + "'").exit_code, 0);
  ASSERT_EQ(run("report --db '" + threaded.string() + "' -o '" + b.string() + "'").exit_code, 0);
  EXPECT_EQ(slurp(dir_ / "a.json"), slurp(dir_ / "b.json"));
}

}  // namespace
