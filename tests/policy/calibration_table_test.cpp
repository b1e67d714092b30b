// The calibration table (policy/calibration_table.hpp): write -> parse round trip, the sampler and
// the agreement lookup against hand-worked bins, the counter, and every malformed input as one
// line naming the file, line, field and what was expected and found.

#include "exitsim/policy/calibration_table.hpp"

#include <gtest/gtest.h>

#include <sstream>

#include "exitsim/core/error.hpp"
#include "support/test_files.hpp"

namespace exitsim::policy {
namespace {

CalibrationTable parse(const std::string& text) {
  std::istringstream in(text);
  return CalibrationTable::parse(in, "c.csv");
}

std::string error(const std::string& text) {
  return test_support::error_of([&] { parse(text); });
}

const std::string k_head =
    "# exitsim-calibration-table v1\n"
    "measure,exit_point,confidence_low,confidence_high,tokens,agreeing\n";

// Point 1: [0, 0.5) 1 token (0 agree), [0.5, 1] 3 tokens (3 agree).
// Point 2: [0, 0.25) none, [0.25, 1] 4 tokens (1 agrees).
const std::string k_good = k_head +
                           "margin,1,0,0.5,1,0\n"
                           "margin,1,0.5,1,3,3\n"
                           "margin,2,0,0.25,0,0\n"
                           "margin,2,0.25,1,4,1\n";

TEST(CalibrationTable, WritesWhatItReads) {
  const CalibrationTable table = parse(k_good);
  EXPECT_EQ(table.measure(), "margin");
  EXPECT_EQ(table.exit_points(), 2u);
  std::ostringstream out;
  table.write(out);
  EXPECT_EQ(out.str(), k_good);
  EXPECT_EQ(parse(out.str()), table);
}

TEST(CalibrationTable, SamplesABinByItsTokenShareThenUniformlyWithin) {
  const CalibrationTable table = parse(k_good);
  // Point 1 holds 4 tokens: u * 4 below 1 lands in [0, 0.5), at (u * 4) of the way through it.
  EXPECT_DOUBLE_EQ(table.sample_confidence(0, 0.125), 0.25);  // 0.5 of bin 1: 0 + 0.5 * 0.5
  // u = 0.5: 2 tokens in, 1 into bin 2's 3: 0.5 + (1 / 3) * 0.5.
  EXPECT_DOUBLE_EQ(table.sample_confidence(0, 0.5), 0.5 + 0.5 / 3.0);
  // Point 2's empty bin is never drawn: u = 0 is the bottom of [0.25, 1].
  EXPECT_DOUBLE_EQ(table.sample_confidence(1, 0.0), 0.25);
  EXPECT_DOUBLE_EQ(table.sample_confidence(1, 1.0), 1.0);  // the top of the last bin
}

TEST(CalibrationTable, AgreementIsTheBinsRateOrThePointsForAnEmptyBin) {
  const CalibrationTable table = parse(k_good);
  EXPECT_EQ(table.agreement_probability(0, 0.2), 0.0);   // 0 of 1
  EXPECT_EQ(table.agreement_probability(0, 0.5), 1.0);   // 3 of 3 (the bin starts at 0.5)
  EXPECT_EQ(table.agreement_probability(0, 1.0), 1.0);   // the last bin includes 1
  EXPECT_EQ(table.agreement_probability(1, 0.6), 0.25);  // 1 of 4
  EXPECT_EQ(table.agreement_probability(1, 0.1), 0.25);  // empty bin: the point's 1 of 4
}

TEST(CalibrationTable, CounterBinsObservationsEvenly) {
  CalibrationCounter counter("top1", 1, 4);
  counter.add(0, 0.1, true);    // [0, 0.25)
  counter.add(0, 0.25, false);  // [0.25, 0.5): the edge belongs to the upper bin
  counter.add(0, 1.0, true);    // the last bin includes 1
  const CalibrationTable table = counter.table("counted");
  ASSERT_EQ(table.bins(0).size(), 4u);
  EXPECT_EQ(table.bins(0)[0], (CalibrationBin{0.0, 0.25, 1, 1}));
  EXPECT_EQ(table.bins(0)[1], (CalibrationBin{0.25, 0.5, 1, 0}));
  EXPECT_EQ(table.bins(0)[2], (CalibrationBin{0.5, 0.75, 0, 0}));
  EXPECT_EQ(table.bins(0)[3], (CalibrationBin{0.75, 1.0, 1, 1}));
  EXPECT_THROW(CalibrationCounter("top1", 2, 4).table("x"), std::invalid_argument);
}

TEST(CalibrationTable, MalformedInputIsOneLineNamingFileLineAndField) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"# exitsim-calibration-table v2\n", "version"},
      {"# exitsim-calibration-table v1\nmeasure,exit_point\n", "header"},
      {k_head + "entropy,1,0,1,1,1\n", "measure"},
      {k_head + "margin,1,0,0.5,1,0\ntop1,1,0.5,1,1,0\n", "measure"},
      {k_head + "margin,2,0,1,1,1\n", "exit_point"},
      {k_head + "margin,1,0.1,1,1,1\n", "confidence_low"},
      {k_head + "margin,1,0,1.5,1,1\n", "confidence_high"},
      {k_head + "margin,1,0,1,-1,0\n", "tokens"},
      {k_head + "margin,1,0,1,1,2\n", "agreeing"},
      {k_head + "margin,1,0,0.5,1,1\n", "exit_point"},  // bins stop short of 1
      {k_head + "margin,1,0,1,0,0\n", "exit_point"},    // a point without tokens
      {k_head, "row"},
  };
  for (const auto& [text, field] : cases) {
    const std::string message = error(text);
    SCOPED_TRACE(text);
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    EXPECT_EQ(message.rfind("c.csv", 0), 0u) << message;
    EXPECT_NE(message.find(": " + field + ": "), std::string::npos) << message;
    EXPECT_NE(message.find("expected"), std::string::npos) << message;
  }
  // One in full: the file, the line (3: after the version and header lines), the column (16:
  // the sixth field, after "margin,1,0,1,1,"), the field, expected and found.
  EXPECT_EQ(error(k_head + "margin,1,0,1,1,2\n"),
            "c.csv:3:16: agreeing: expected at most 1 (the bin's tokens), found 2");
}

}  // namespace
}  // namespace exitsim::policy
