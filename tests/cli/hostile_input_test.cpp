// Hostile inputs through the binary (the findings' D-numbers): each ends in one line on stderr
// naming the file, exit code 1, and no internal error (exit 3) or signal.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

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
  expect_one_line_error(run("trace inspect '" + mooncake.string() + "'"),
                        mooncake.string() + ":1:1:",
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

}  // namespace
