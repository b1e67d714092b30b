// `exitsim help`, `scenario schema --json` and the bash completion script: what a user and a tool
// read to find their way, generated from the command tree and the schema so they cannot drift.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "support/cli_fixture.hpp"

namespace {

using namespace cli_support;
namespace fs = std::filesystem;

TEST_F(Cli, HelpListsCommandsAndTopicsAndExplainsKeys) {
  const Result overview = run("help");
  ASSERT_EQ(overview.exit_code, 0) << overview.err;
  for (const char* command : {"simulate", "engine", "calibrate", "sweep", "plan", "report"})
    EXPECT_NE(overview.out.find(std::string("\n  ") + command + " "), std::string::npos) << command;
  EXPECT_NE(overview.out.find("schedulers"), std::string::npos) << overview.out;
  const Result command = run("help engine run");
  EXPECT_NE(command.out.find("--profile-dir"), std::string::npos) << command.out;
  const Result key = run("help scheduler.preemption");
  EXPECT_EQ(
      key.out.rfind("scheduler.preemption (enum, default recompute, allowed recompute, swap)", 0),
      0U)
      << key.out;
  const Result topic = run("help schedulers");
  EXPECT_NE(topic.out.find("scheduler.max_running (integer, default 256"), std::string::npos)
      << topic.out;
  const Result unknown = run("help nope");
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_EQ(unknown.err,
            "exitsim: error: help: expected a command, a topic or a scenario key path (exitsim "
            "help lists them), found \"nope\"\n");
}

TEST_F(Cli, EveryKeyOfTheSchemaJsonIsInTheMarkdownSchema) {
  const Result json = run("scenario schema --json");
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const nlohmann::json schema = nlohmann::json::parse(json.out);
  EXPECT_EQ(schema["format"], "exitsim-scenario-schema v1");
  const Result markdown = run("scenario schema");
  std::size_t rows = 0;
  bool found_kind = false;
  for (const nlohmann::json& key : schema["keys"]) {
    const std::string path = key["key"];
    // A row, or a top-level section's heading.
    EXPECT_TRUE(markdown.out.find("| `" + path + "` |") != std::string::npos ||
                markdown.out.find("## `" + path + "`\n") != std::string::npos)
        << path;
    ++rows;
    if (path == "scheduler.kind") {
      found_kind = true;
      EXPECT_EQ(key["default"], "continuous");
      EXPECT_EQ(key["type"], "identifier");
    }
  }
  EXPECT_TRUE(found_kind);
  // Every key row of the Markdown (records keys appear twice there: as a section and a row).
  EXPECT_GE(static_cast<std::size_t>(std::count(markdown.out.begin(), markdown.out.end(), '\n')),
            rows);
  EXPECT_GT(rows, 150U);
}

TEST_F(Cli, BashCompletionCompletesCommandsAndOptions) {
  const Result script = run("completion bash");
  ASSERT_EQ(script.exit_code, 0) << script.err;
  const fs::path path = file("exitsim.bash", script.out);
  const auto complete = [&](const std::string& words, int current) {
    const fs::path out = dir_ / "reply.txt";
    const std::string command = "bash -c 'source \"" + path.string() + "\"; COMP_WORDS=(" + words +
                                "); COMP_CWORD=" + std::to_string(current) +
                                "; _exitsim; echo \"${COMPREPLY[@]}\"' > '" + out.string() + "'";
    EXPECT_EQ(std::system(command.c_str()), 0) << command;
    return slurp(out);
  };
  EXPECT_EQ(complete("exitsim engine r", 2), "run random-model\n");
  EXPECT_EQ(complete("exitsim simulate --o", 2), "--out\n");
  EXPECT_EQ(complete("exitsim calibrate --out", 2), "--out\n");  // the old --output is hidden
  EXPECT_EQ(complete("exitsim s", 1), "simulate scenario sweep\n");
}

}  // namespace

namespace {

using namespace cli_support;

// Results carry the version and commit `--version` prints, so a number can be traced to its code.
TEST_F(Cli, SummaryRecordsTheVersionAndCommit) {
  const Result version = run("--version");
  const std::string line = version.out.substr(0, version.out.find('\n'));
  const fs::path out = dir_ / "run";
  ASSERT_EQ(run("simulate --set workload.requests=5 -o '" + out.string() + "'").exit_code, 0);
  const nlohmann::json summary = nlohmann::json::parse(slurp(out / "summary.json"));
  const std::string recorded = "exitsim " + std::string(summary["exitsim"]["version"]) +
                               " (commit " + std::string(summary["exitsim"]["commit"]) + ")";
  EXPECT_EQ(recorded, line);
}

}  // namespace

namespace {

using namespace cli_support;

// Off a terminal (a Slurm log), progress is one line per tenth of the work on stderr; --quiet,
// after any command, turns it off.
TEST_F(Cli, ProgressOffATerminalIsALinePerTenthAndQuietSilencesIt) {
  const fs::path scenario = file("sweep.yaml",
                                 "workload:\n  requests: 40\n"
                                 "sweep:\n"
                                 "  - key: scheduler.max_running\n    values: [2, 4, 8, 16, 32]\n");
  const Result swept =
      run("sweep '" + scenario.string() + "' --db '" + (dir_ / "a.db").string() + "' -j 1");
  ASSERT_EQ(swept.exit_code, 0) << swept.err;
  for (int k = 1; k <= 5; ++k) {
    EXPECT_NE(swept.err.find(fmt::format("sweep: {}/5 runs ({}%), ", k, 20 * k)), std::string::npos)
        << swept.err;
  }
  EXPECT_EQ(std::count(swept.err.begin(), swept.err.end(), '\n'), 5) << swept.err;
  const Result quiet =
      run("sweep '" + scenario.string() + "' --db '" + (dir_ / "b.db").string() + "' -j 1 --quiet");
  ASSERT_EQ(quiet.exit_code, 0) << quiet.err;
  EXPECT_EQ(quiet.err, "");
  EXPECT_NE(quiet.out.find("5 runs made"), std::string::npos) << quiet.out;
}

}  // namespace

namespace {

using namespace cli_support;

// An output file's folder that cannot be made is refused before the work, not after it.
TEST_F(Cli, PlanRefusesAnOutputFolderBlockedByAFileBeforeItsWork) {
  const fs::path blocker = file("afile", "");
  const Result r = run("plan --target-rate 1 -o '" + (blocker / "plan.csv").string() + "'");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "exitsim: error: " + blocker.string() +
                       ": --out: expected a directory that can "
                       "be created, found " +
                       blocker.string() + " is a file, not a directory\n");
  EXPECT_EQ(r.out, "");  // nothing planned
}

}  // namespace

namespace {

using namespace cli_support;

// A generic CSV on the command line: --columns maps its header as workload.trace.columns does.
TEST_F(Cli, TraceCommandsReadAGenericCsvThroughColumns) {
  const fs::path csv = file("g.csv", "t,prompt,completion\n0.5,10,20\n1.25,30,40\n");
  const std::string inspect = "trace inspect '" + csv.string() + "' --format csv";
  const Result read =
      run(inspect + " --columns input_tokens=prompt,output_tokens=completion,arrival=t");
  ASSERT_EQ(read.exit_code, 0) << read.err;
  EXPECT_NE(read.out.find("requests            2"), std::string::npos) << read.out;
  const Result typo = run(inspect + " --columns input_tokens=promt,output_tokens=completion");
  EXPECT_EQ(typo.exit_code, 1);
  EXPECT_EQ(typo.err,
            "exitsim: error: " + csv.string() +
                ":1:1: --columns.input_tokens: expected a column of the header (\"t\", "
                "\"prompt\", \"completion\"), found \"promt\" (did you mean \"prompt\"?)\n");
  const Result bad_key = run(inspect + " --columns inputs=prompt");
  EXPECT_EQ(bad_key.err,
            "exitsim: error: --columns: expected KEY=COLUMN with KEY one of arrival, arrival_unit, "
            "input_tokens, output_tokens, found \"inputs=prompt\"\n");
}

}  // namespace
