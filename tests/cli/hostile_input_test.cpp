// Hostile inputs through the binary (the findings' D-numbers): each ends in one line on stderr
// naming the file, exit code 1, and no internal error (exit 3) or signal.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "support/cli_fixture.hpp"

namespace {

using namespace cli_support;

// One line, naming `file`, exit 1.
void expect_one_line_error(const Result& r, const std::string& file, const std::string& says) {
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_EQ(r.err.find("exitsim: error: " + file), 0U) << r.err;
  EXPECT_NE(r.err.find(says), std::string::npos) << r.err;
}

// D1, D2, D3 through every scenario command's loader: no stack overflow, no endless read.
TEST_F(Cli, HostileScenarioFilesAreOneLineErrors) {
  const fs::path cycle = file("cycle.yaml", "a: &d\n  b: *d\n");
  expect_one_line_error(run("scenario show '" + cycle.string() + "'"),
                        cycle.string() + ":1:4:", "scenarios take no YAML anchors or aliases");
  expect_one_line_error(run("simulate --no-output --set 'name=&d {a: *d}'"),
                        "--set: name:", "found the anchor &d");
  const fs::path comma = file("comma.yaml", ",");
  expect_one_line_error(
      run("sweep '" + comma.string() + "' --db '" + (dir_ / "s.db").string() + "'"),
      comma.string() + ":", "expected one YAML document");
  EXPECT_FALSE(fs::exists(dir_ / "s.db"));
}

// D9: a number beyond a double in any JSON input was an internal error naming no file.
TEST_F(Cli, JsonNumberOverflowNamesTheFile) {
  const fs::path mooncake =
      file("m.jsonl", "{\"timestamp\": 0, \"input_length\": 1e400, \"output_length\": 5}\n");
  expect_one_line_error(run("trace inspect '" + mooncake.string() + "'"), mooncake.string() + ":1:",
                        "expected JSON numbers within the range of a double, found number "
                        "overflow parsing '1e400'");
  const fs::path profile = file("profile.json", "{\"format\": 1e400}");
  expect_one_line_error(
      run("simulate --no-output --set cost_model.kind=calibrated --set 'cost_model.profile=" +
          profile.string() + "'"),
      profile.string() + ":", "found number overflow parsing '1e400'");
  // The model config goes through the engine's strict reader.
  const fs::path model = dir_ / "model";
  ASSERT_EQ(run("engine random-model -o '" + model.string() + "' --seed 3").exit_code, 0);
  std::string config = slurp(model / "exitsim.json");
  config.insert(config.find('{') + 1, "\"overflow\": 1e400,");
  file("model/exitsim.json", config);
  expect_one_line_error(run("engine run --model '" + model.string() + "' --text '" +
                            file("t.txt", "some text to run").string() + "' --no-output"),
                        (model / "exitsim.json").string() + ":",
                        "expected valid JSON, found number overflow parsing '1e400'");
}

// A NUL ended the text for nlohmann, so a JSON input with bytes after one was read as its part
// before it: calibrate wrote a profile from such a run.json, and report took such a plan. Each
// names its file now (report named only --plan before).
TEST_F(Cli, JsonInputsWithANulByteAreRefusedNamingTheFile) {
  const std::string with_nul = std::string("{\"format\": \"exitsim-plan v1\"}\0garbage", 38);
  const fs::path plan = file("plan.json", with_nul);
  const fs::path db = dir_ / "s.db";
  ASSERT_EQ(run("sweep --set 'sweep=[{key: seed, values: [1]}]' --set workload.requests=5 --db '" +
                db.string() + "'")
                .exit_code,
            0);
  expect_one_line_error(run("report --db '" + db.string() + "' --plan '" + plan.string() +
                            "' -o '" + (dir_ / "r.html").string() + "'"),
                        plan.string() + ":", "expected JSON, found a NUL byte at byte 30");
  const fs::path other = file("other.json", "{\"format\": \"x\"}");
  expect_one_line_error(run("report --db '" + db.string() + "' --validation '" + other.string() +
                            "' -o '" + (dir_ / "r.html").string() + "'"),
                        other.string() + ":",
                        "--validation: format: expected \"exitsim-validation v1\"");
  EXPECT_FALSE(fs::exists(dir_ / "r.html"));

  const std::string model = random_model_and_text("the quick brown fox jumps over it. ", 40);
  ASSERT_EQ(run("engine run " + model +
                " --threads 1 --set workload.requests=2 --set "
                "'workload.input_tokens={dist: fixed, value: 8}' --set "
                "'workload.output_tokens={dist: fixed, value: 4}' --profile-dir '" +
                (dir_ / "prof").string() + "' --out '" + (dir_ / "run").string() + "'")
                .exit_code,
            0);
  const fs::path run_json = dir_ / "prof" / "run.json";
  file("prof/run.json", slurp(run_json) + std::string("\0{}", 3));
  expect_one_line_error(run("calibrate '" + (dir_ / "prof" / "op_trace.csv").string() + "' -o '" +
                            (dir_ / "p.json").string() + "' --force"),
                        run_json.string() + ":", "expected JSON, found a NUL byte at byte");
  EXPECT_FALSE(fs::exists(dir_ / "p.json"));
}

// D4: per-op prices past int64 nanoseconds wrapped to 1 ns; the run reported 0 ms TPOT, exit 0.
TEST_F(Cli, PricesBeyondAnyIterationAreRefusedNotWrapped) {
  const fs::path table = file("t.csv",
                              "# exitsim-cost-table v1\nop,batch,time_us\nlayer,1,1e16\n"
                              "layer,111,1e16\nlm_head,1,801\nembedding,1,839\n");
  expect_one_line_error(
      run("simulate --no-output --set workload.requests=30 --set cost_model.kind=table --set "
          "'cost_model.profile=" +
          table.string() + "'"),
      table.string() + ": cost_model.profile: expected iteration prices under 1e+09 us",
      "extrapolate far beyond what was measured");
  // Below the wrap, 1e13 us per layer ended in an internal error of the metrics.
  const fs::path below = file("b.csv",
                              "# exitsim-cost-table v1\nop,batch,time_us\nlayer,1,1e13\n"
                              "layer,111,1e13\nlm_head,1,801\nembedding,1,839\n");
  expect_one_line_error(
      run("simulate --no-output --set workload.requests=30 --set cost_model.kind=table --set "
          "'cost_model.profile=" +
          below.string() + "'"),
      below.string() + ": cost_model.profile:", "expected iteration prices under 1e+09 us");
}

// D7: synthetic lengths were not bounded like trace lengths; input + output overflowed int64.
TEST_F(Cli, SyntheticLengthsBeyondAnyRequestAreRefused) {
  expect_one_line_error(run("simulate --no-output --set workload.requests=30 --set "
                            "'workload.input_tokens={dist: fixed, value: 9223372036854775807}'"),
                        "workload.input_tokens.value:",
                        "expected at most 2147483648 tokens, found 9223372036854775807");
  expect_one_line_error(
      run("simulate --no-output --set workload.requests=30 --set workload.input_tokens.mean=1e300 "
          "--set workload.input_tokens.sigma=10 --set workload.input_tokens.max=0"),
      "workload.input_tokens.mean:", "expected a mean from 1 to 2147483648 tokens");
  // A lognormal without a maximum whose draws leave every request length behind.
  expect_one_line_error(
      run("simulate --no-output --set workload.requests=30 --set workload.input_tokens.mean=2e9 "
          "--set workload.input_tokens.sigma=1 --set workload.input_tokens.max=0 --set "
          "scheduler.unservable=reject"),
      "workload.input_tokens.max:", "found none, and a draw of");
}

// D11: a cv the schema allowed made the gamma's shape infinite: an internal error.
TEST_F(Cli, AGammaCvTooSmallForItsShapeIsRefusedByTheSchema) {
  expect_one_line_error(
      run("simulate --no-output --set workload.arrivals.process=gamma --set "
          "workload.arrivals.cv=1e-300"),
      "--set: workload.arrivals.cv:", "expected a number in [0.01, 100], found 1e-300");
}

// D8: op-trace times the reader accepted overflowed int64 in the analysis (UB; wrapped numbers).
TEST_F(Cli, OpTraceTimesThatWouldOverflowTheAnalysisAreRefused) {
  const std::string head =
      "# exitsim-op-trace v1\nname,kind,device,stream,start_ns,duration_ns,batch_tokens,"
      "context_tokens,depth,recursion,step_id,correlation_id\n";
  const fs::path duration =
      file("d.csv", head + "embed,other,cpu,0,493906388,9223372036854775807,74,0,-1,0,1,1\n");
  expect_one_line_error(run("trace critical-path '" + duration.string() + "'"),
                        duration.string() + ":3:29: duration_ns:",
                        "expected an integer from 0 to 2305843009213693952");
  const fs::path start =
      file("s.csv", head + "embed,other,cpu,0,-9223372036854775808,8132,74,0,-1,0,1,1\n");
  expect_one_line_error(run("trace critical-path '" + start.string() + "'"),
                        start.string() + ":3:19: start_ns:",
                        "expected an integer from -2305843009213693952 to 2305843009213693952");
}

// D14, D19: a file where an output folder goes was an internal error after the token trace was
// written; validate left an empty folder behind an unknown strategy. Both are refused first.
TEST_F(Cli, OutputFoldersThatCannotBeMadeAreRefusedBeforeTheRun) {
  const std::string engine = random_model_and_text("a sentence to decode. ", 20) +
                             " --set workload.requests=2 --set "
                             "'workload.input_tokens={dist: fixed, value: 8}' --set "
                             "'workload.output_tokens={dist: fixed, value: 4}'";
  const fs::path in_the_way = file("a_file", "");
  expect_one_line_error(run("engine run " + engine + " --out '" + in_the_way.string() + "'"),
                        in_the_way.string() + ": --out: expected a directory that can be created",
                        "is a file, not a directory");
  const fs::path out = dir_ / "ok_dir";
  expect_one_line_error(
      run("engine run " + engine + " --out '" + out.string() + "' --profile-dir '" +
          (in_the_way / "x").string() + "'"),
      (in_the_way / "x").string() + ": --profile-dir:", "is a file, not a directory");
  EXPECT_FALSE(fs::exists(out));
  const fs::path validation = dir_ / "validation";
  expect_one_line_error(run("validate " + engine + " --profile '" + file("p.json", "{}").string() +
                            "' --strategies nope -o '" + validation.string() + "'"),
                        "--strategies:", "found \"nope\"");
  EXPECT_FALSE(fs::exists(validation));
}

// D15: report treated an empty file as a sweep database and wrote a runs table into it, and took
// an empty --plan as none given (another application's database: SweepDatabase's tests).
TEST_F(Cli, ReportReadsWithoutWritingAndRefusesEmptyInputs) {
  const fs::path empty_db = file("e.db", "");
  expect_one_line_error(
      run("report --db '" + empty_db.string() + "' -o '" + (dir_ / "r.html").string() + "'"),
      empty_db.string() + ":", "found no runs table");
  EXPECT_EQ(fs::file_size(empty_db), 0U);
  EXPECT_FALSE(fs::exists(dir_ / "r.html"));

  const fs::path db = dir_ / "s.db";
  ASSERT_EQ(run("sweep --set 'sweep=[{key: seed, values: [1, 2]}]' --set workload.requests=5 "
                "--db '" +
                db.string() + "'")
                .exit_code,
            0);
  // A finished sweep is one file, and a report leaves the folder as it found it.
  EXPECT_FALSE(fs::exists(dir_ / "s.db-wal"));
  const std::string before = slurp(db);
  ASSERT_EQ(
      run("report --db '" + db.string() + "' -o '" + (dir_ / "r.html").string() + "'").exit_code,
      0);
  EXPECT_EQ(slurp(db), before);
  EXPECT_FALSE(fs::exists(dir_ / "s.db-wal"));
  EXPECT_FALSE(fs::exists(dir_ / "s.db-shm"));

  const fs::path empty_plan = file("plan.json", "");
  expect_one_line_error(run("report --db '" + db.string() + "' --plan '" + empty_plan.string() +
                            "' -o '" + (dir_ / "r2.html").string() + "'"),
                        empty_plan.string() + ": --plan:", "found an empty file");
  EXPECT_FALSE(fs::exists(dir_ / "r2.html"));
}

// Point 4 of issue 19 and D19: an interrupted simulate left hundreds of MB of .tmp files (and
// the folders it made). Outputs are now written in a staging folder beside the target
// (`<out>.exitsim-<pid>.tmp`) and moved in when the run succeeds. SIGINT and SIGTERM remove the
// staging folder; a kill -9 cannot, so it carries the run's pid and the next run beside it
// removes it and says so. Either way the target holds no file of the interrupted run.
class CrashSafety : public Cli {
 protected:
  // Starts a long simulate into `out`, waits until a temporary file exists in its staging
  // folder, sends `signal` and waits for the run to end; 0 when the file was there before the
  // signal.
  int interrupt(const fs::path& out, const std::string& signal) const {
    const std::string command =
        "cd '" + std::string(EXITSIM_SOURCE_DIR) + "' && ('" + std::string(EXITSIM_CLI_PATH) +
        "' simulate --set workload.requests=3000000 --set outputs.timeline=true --out '" +
        out.string() + "' > /dev/null 2>&1 & pid=$!; seen=1; for i in $(seq 1 200); do ls '" +
        out.string() + "'.exitsim-$pid.tmp 2>/dev/null | grep -q exitsim- && { seen=0; break; }; " +
        "sleep 0.05; done; kill -" + signal + " $pid; wait $pid; exit $seen)";
    const int status = std::system(command.c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  static std::vector<std::string> entries(const fs::path& dir) {
    std::vector<std::string> names;
    for (const fs::directory_entry& entry : fs::directory_iterator(dir))
      names.push_back(entry.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }
};

TEST_F(CrashSafety, SigintAndSigtermLeaveNothingBehind) {
  for (const std::string signal : {"INT", "TERM"}) {
    const fs::path out = dir_ / ("made/by/" + signal);
    ASSERT_EQ(interrupt(out, signal), 0);
    EXPECT_FALSE(fs::exists(dir_ / "made")) << signal;  // the folders it made, emptied, removed
  }
  // A folder that was there before is kept as it was, and nothing is left beside it.
  const fs::path kept = dir_ / "kept";
  fs::create_directories(kept);
  file("kept/mine.txt", "a user's file");
  ASSERT_EQ(interrupt(kept, "TERM"), 0);
  EXPECT_EQ(entries(kept), std::vector<std::string>{"mine.txt"});
  EXPECT_EQ(entries(dir_), std::vector<std::string>{"kept"});
}

TEST_F(CrashSafety, TheNextRunRemovesWhatAKilledRunLeft) {
  const fs::path out = dir_ / "out";
  ASSERT_EQ(interrupt(out, "KILL"), 0);
  EXPECT_FALSE(fs::exists(out));  // nothing of the run in the target
  std::vector<std::string> left;
  for (const std::string& name : entries(dir_)) {
    if (name.starts_with("out.exitsim-"))
      left.push_back(name);
  }
  ASSERT_EQ(left.size(), 1U);
  const Result next = run("simulate --set workload.requests=20 --out '" + out.string() + "'");
  ASSERT_EQ(next.exit_code, 0) << next.err;
  EXPECT_NE(next.err.find("exitsim: note: removed " + (dir_ / left.front()).string() +
                          ", left by an interrupted run (pid "),
            std::string::npos)
      << next.err;
  EXPECT_EQ(entries(out), (std::vector<std::string>{"requests.csv", "summary.json"}));
  EXPECT_FALSE(fs::exists(dir_ / left.front()));
}

// Per-file renames left a killed run's finished files beside an older run's: a folder of two
// runs. Killed midway, a run now leaves the folder byte for byte as the older run left it; a
// run that succeeds replaces its own files and leaves the user's alone.
TEST_F(CrashSafety, AKilledRunLeavesTheOlderRunsOutputsWhole) {
  const fs::path out = dir_ / "out";
  const Result first = run("simulate --set workload.requests=20 --out '" + out.string() + "'");
  ASSERT_EQ(first.exit_code, 0) << first.err;
  file("out/mine.txt", "a user's file");
  const std::string requests = slurp(out / "requests.csv");
  const std::string summary = slurp(out / "summary.json");
  ASSERT_EQ(interrupt(out, "KILL"), 0);
  EXPECT_EQ(entries(out), (std::vector<std::string>{"mine.txt", "requests.csv", "summary.json"}));
  EXPECT_EQ(slurp(out / "requests.csv"), requests);
  EXPECT_EQ(slurp(out / "summary.json"), summary);

  const Result again = run("simulate --set workload.requests=30 --out '" + out.string() + "'");
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(entries(out), (std::vector<std::string>{"mine.txt", "requests.csv", "summary.json"}));
  EXPECT_NE(slurp(out / "requests.csv"), requests);
  EXPECT_EQ(slurp(out / "mine.txt"), "a user's file");
}

// D21: a NUL after a JSON object ended the text for nlohmann, so what followed was ignored; a
// BurstGPT header naming a column twice was read from its first place.
TEST_F(Cli, BytesAReaderWouldIgnoreAreRefused) {
  const fs::path mooncake =
      file("m.jsonl", std::string("{\"timestamp\": 0, \"input_length\": 10, \"output_length\": "
                                  "5}\0garbage\n",
                                  65));
  expect_one_line_error(run("trace inspect '" + mooncake.string() + "'"),
                        mooncake.string() + ":1:", "expected a JSON object, found a NUL byte");
  const fs::path burst = file("b.csv",
                              "Timestamp,Model,Request tokens,Request tokens,Response tokens,"
                              "Total tokens,Log Type\n5,ChatGPT,472,9,18,490,Conversation log\n");
  expect_one_line_error(run("trace inspect '" + burst.string() + "'"), burst.string() + ":1:1:",
                        "expected each column named once, found \"Request tokens\" as columns 3 "
                        "and 4");
}

// N3: every shape key within its documented range, the weights past int64: refused at the
// largest part's key instead of wrapping to a negative size and running.
TEST_F(Cli, AModelPastTheWeightBoundIsRefusedNotWrapped) {
  const Result r =
      run("simulate --no-output --set model.preset=mixtral-8x7b --set model.d_model=1048576 "
          "--set model.ffn_dim=4194304 --set model.experts=65536 --set model.depth.prelude=6 "
          "--set model.vocab=32000 --set workload.requests=20 --set workload.input_tokens.max=512 "
          "--set workload.output_tokens.max=64");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(r.err,
            "exitsim: error: --set: model.experts: expected a model of at most 2^62 bytes of "
            "weights (4 EiB), found about 1.04e+19 bytes: 6 layers x (1.07e+10 attention + "
            "8.65e+17 MLP parameters) + 0 LoRA + 6.71e+10 embedding and LM head parameters, at 2 "
            "bytes (bf16)\n");
  EXPECT_TRUE(r.out.empty());
}

// N8: arrivals at the documented maxima (Mooncake 4611686018427 ms, native 2^62 ns after the
// first) leave the run its half of the clock: the simulation completes.
TEST_F(Cli, ArrivalsAtTheDocumentedMaximumRunToCompletion) {
  const fs::path mooncake =
      file("ts.jsonl",
           "{\"timestamp\": 0, \"input_length\": 5, \"output_length\": 5}\n"
           "{\"timestamp\": 4611686018427, \"input_length\": 5, \"output_length\": 5}\n");
  Result r = run("simulate --no-output --set workload.source=trace --set 'workload.trace.path=" +
                 mooncake.string() + "'");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const fs::path native = file("n.csv",
                               "# exitsim-requests v1\n"
                               "request_id,arrival_ns,input_tokens,output_tokens\n"
                               "0,0,5,5\n1,4611686018427387904,5,5\n");
  r = run("simulate --no-output --set workload.source=trace --set 'workload.trace.path=" +
          native.string() + "'");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  // A slow-down of the replay may not push them past it.
  r =
      run("simulate --no-output --set workload.source=trace --set workload.trace.rate_scale=0.5 "
          "--set 'workload.trace.path=" +
          native.string() + "'");
  EXPECT_EQ(r.err,
            "exitsim: error: workload.trace.rate_scale: expected a scale that keeps the replayed "
            "arrivals within 2^62 ns (about 146 years), found 0.5 (the arrival at "
            "4611686018427387904 ns would be replayed at 9.22e+18 ns)\n");
  EXPECT_EQ(r.exit_code, 1);
}

}  // namespace
