// The threshold table: round trip, lookup and interpolation, every malformed input, and the
// confidence rows of a quality table read as one.

#include "exitsim/policy/exit_table.hpp"

#include <gtest/gtest.h>

#include <sstream>

#include "exitsim/core/error.hpp"
#include "support/test_files.hpp"

namespace exitsim::policy {
namespace {

ExitTable parse(const std::string& text) {
  std::istringstream in(text);
  return ExitTable::parse(in, "t.csv", "skip_kv");
}

const std::string k_good =
    "# exitsim-exit-table v1\n"
    "threshold,p_exit_1,p_exit_2,p_exit_3\n"
    "0.5,0.6,0.3,0.1\n"
    "0.7,0.4,0.4,0.2\n"
    "0.9,0.2,0.3,0.5\n";

TEST(ExitTable, ReadsRowsInOrder) {
  const ExitTable table = parse(k_good);
  EXPECT_EQ(table.exit_points(), 3u);
  EXPECT_EQ(table.rows(), 3u);
  EXPECT_EQ(table.source(), "t.csv");
  EXPECT_EQ(std::vector<double>(table.thresholds().begin(), table.thresholds().end()),
            (std::vector<double>{0.5, 0.7, 0.9}));
  const auto row = table.distribution(1);
  EXPECT_EQ(std::vector<double>(row.begin(), row.end()), (std::vector<double>{0.4, 0.4, 0.2}));
}

TEST(ExitTable, WritesWhatItReads) {
  const ExitTable table({0.1, 0.30000000000000004, 0.95},
                        {{1.0 / 3, 1.0 / 3, 1.0 / 3}, {0.5, 0.25, 0.25}, {0.0, 0.0, 1.0}});
  std::ostringstream out;
  table.write(out);
  EXPECT_EQ(out.str(),
            "# exitsim-exit-table v1\n"
            "threshold,p_exit_1,p_exit_2,p_exit_3\n"
            "0.1,0.3333333333333333,0.3333333333333333,0.3333333333333333\n"
            "0.30000000000000004,0.5,0.25,0.25\n"
            "0.95,0,0,1\n");
  EXPECT_EQ(parse(out.str()), table);

  std::ostringstream again;
  parse(k_good).write(again);
  EXPECT_EQ(again.str(), k_good);
}

TEST(ExitTable, ToleratesCarriageReturnsAndSpaces) {
  const ExitTable table =
      parse("# exitsim-exit-table v1\r\nthreshold, p_exit_1 ,p_exit_2\r\n 0.5 ,\t0.25,0.75\r\n");
  EXPECT_EQ(table.exit_points(), 2u);
  EXPECT_EQ(table.exit_distribution_for(0.5), (std::vector<double>{0.25, 0.75}));
}

TEST(ExitTable, ExactRowsAndLinearInterpolation) {
  const ExitTable table = parse(k_good);
  EXPECT_EQ(table.exit_distribution_for(0.5), (std::vector<double>{0.6, 0.3, 0.1}));
  EXPECT_EQ(table.exit_distribution_for(0.7), (std::vector<double>{0.4, 0.4, 0.2}));
  EXPECT_EQ(table.exit_distribution_for(0.9), (std::vector<double>{0.2, 0.3, 0.5}));
  const std::vector<double> mid = table.exit_distribution_for(0.6);
  ASSERT_EQ(mid.size(), 3u);
  EXPECT_NEAR(mid[0], 0.5, 1e-12);
  EXPECT_NEAR(mid[1], 0.35, 1e-12);
  EXPECT_NEAR(mid[2], 0.15, 1e-12);
  const std::vector<double> quarter = table.exit_distribution_for(0.75);
  EXPECT_NEAR(quarter[0], 0.35, 1e-12);
  EXPECT_NEAR(quarter[1], 0.375, 1e-12);
  EXPECT_NEAR(quarter[2], 0.275, 1e-12);
  EXPECT_NEAR(quarter[0] + quarter[1] + quarter[2], 1.0, 1e-12);
}

TEST(ExitTable, ThresholdsOutsideTheTableAreInputErrors) {
  const ExitTable table = parse(k_good);
  for (const double outside : {0.49, 0.95}) {
    try {
      table.exit_distribution_for(outside);
      FAIL() << "expected InputError";
    } catch (const InputError& e) {
      EXPECT_EQ(std::string(e.what()),
                "exit_policy.threshold: expected a threshold in [0.5, 0.9] (the range of exit "
                "table t.csv), found " +
                    std::string(outside < 0.5 ? "0.49" : "0.95"));
    }
  }
}

TEST(ExitTable, ConstructorRejectsMalformedRows) {
  EXPECT_THROW(ExitTable({}, {}), std::invalid_argument);
  EXPECT_THROW(ExitTable({0.5}, {{0.5, 0.4}}), std::invalid_argument);
  EXPECT_THROW(ExitTable({0.5, 0.5}, {{1.0}, {1.0}}), std::invalid_argument);
  EXPECT_THROW(ExitTable({0.5, 0.6}, {{1.0}, {0.5, 0.5}}), std::invalid_argument);
  EXPECT_THROW(ExitTable({0.5}, {{1.5, -0.5}}), std::invalid_argument);
}

TEST(ExitTable, ReadsTheShippedExample) {
  const ExitTable table = ExitTable::read(
      std::string(EXITSIM_SOURCE_DIR) + "/scenarios/examples/exit_table_smollm_mor3.csv",
      "skip_kv");
  EXPECT_EQ(table.exit_points(), 3u);
  EXPECT_GE(table.rows(), 2u);
  EXPECT_EQ(table.exit_distribution_for(0.9).size(), 3u);
}

TEST(ExitTable, MissingFileIsAnInputError) {
  try {
    ExitTable::read("/nonexistent/exit_table.csv", "skip_kv");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "/nonexistent/exit_table.csv: cannot open the exit table for reading");
  }
}

const std::string k_quality =
    "# exitsim-quality-table v2\n"
    "policy,strategy,measure,threshold,capacities,tokens,nll_per_token,top1_agreement,"
    "mean_exit_depth,p_exit_1,p_exit_2,p_exit_3\n"
    "full_depth,full_depth,,,,400,1.2,1,31,0,0,1\n"
    "confidence,skip_kv,margin,0.5,,400,1.3,0.98,18,0.6,0.3,0.1\n"
    "confidence,state_copy,margin,0.5,,400,1.28,0.98,18,0.7,0.2,0.1\n"
    "router_expert_choice,skip_kv,,0.5,,400,1.4,0.95,22,0.3,0.3,0.4\n"
    "confidence,skip_kv,margin,0.9,,400,1.25,0.99,26,0.2,0.3,0.5\n";

TEST(ExitTable, ReadsTheConfidenceRowsOfAQualityTable) {
  const ExitTable table = parse(k_quality);
  EXPECT_EQ(table.source(), "t.csv");
  EXPECT_EQ(table.measure(), "margin");
  EXPECT_EQ(table.exit_points(), 3u);
  EXPECT_EQ(std::vector<double>(table.thresholds().begin(), table.thresholds().end()),
            (std::vector<double>{0.5, 0.9}));
  EXPECT_EQ(table.exit_distribution_for(0.9), (std::vector<double>{0.2, 0.3, 0.5}));
  EXPECT_EQ(table, ExitTable({0.5, 0.9}, {{0.6, 0.3, 0.1}, {0.2, 0.3, 0.5}}));
  EXPECT_EQ(parse(k_good).measure(), "");

  std::istringstream in(k_quality);
  const ExitTable from_memory =
      ExitTable::from_quality_table(QualityTable::parse(in, "q.csv"), "skip_kv");
  EXPECT_EQ(from_memory, table);
  // The rows of another strategy are its own table, never mixed in.
  std::istringstream again(k_quality);
  const ExitTable state_copy =
      ExitTable::from_quality_table(QualityTable::parse(again, "q.csv"), "state_copy");
  EXPECT_EQ(state_copy, ExitTable({0.5}, {{0.7, 0.2, 0.1}}));
  EXPECT_EQ(from_memory.source(), "q.csv");
  EXPECT_EQ(from_memory.measure(), "margin");
}

TEST(ExitTable, ReadsAQualityTableFile) {
  const test_support::TempDir dir;
  EXPECT_EQ(ExitTable::read(dir.write("quality.csv", k_quality), "skip_kv"), parse(k_quality));
}

TEST(ExitTable, QualityTableNeedsConfidenceRowsOfOneMeasure) {
  const std::string top1 = "confidence,skip_kv,top1,0.7,,400,1.3,0.98,18,0.6,0.3,0.1\n";
  const std::string head = k_quality.substr(0, k_quality.find("full_depth"));
  const auto message = [](const std::string& text) {
    return test_support::error_of([&] { parse(text); });
  };
  EXPECT_EQ(message(k_quality + top1),
            "t.csv:8: measure: expected \"margin\" as on line 4 (a threshold means something else "
            "under each measure: keep one measure per table), found \"top1\"");
  EXPECT_EQ(message(head + "full_depth,full_depth,,,,400,1.2,1,31,0,0,1\n"),
            "t.csv: policy: expected at least one confidence row measured under skip_kv (its exit "
            "distributions per threshold; `exitsim engine eval --strategies skip_kv` measures "
            "them), found none");
  // A table of the version before strategies were recorded is refused, not read as skip_kv's.
  EXPECT_EQ(message("# exitsim-quality-table v1\n"),
            "t.csv:1: version: expected \"# exitsim-quality-table v2\", found "
            "\"# exitsim-quality-table v1\"");
  // The quality table's own rules apply, with their positions.
  EXPECT_EQ(message(k_quality + "confidence,skip_kv,margin,0.9,,400,1.25,0.99,26,0.2,0.3,0.5\n"),
            "t.csv:8:27: threshold: expected a threshold above 0.9 (the previous confidence "
            "margin row's under skip_kv), found 0.9");

  std::istringstream in(k_quality + top1);
  const QualityTable mixed = QualityTable::parse(in, "q.csv");
  EXPECT_EQ(test_support::error_of([&] { ExitTable::from_quality_table(mixed, "skip_kv"); }),
            "q.csv: measure: expected \"margin\" as on the first confidence row (a threshold "
            "means something else under each measure: keep one measure per table), found "
            "\"top1\"");
}

struct Malformed {
  const char* name;
  std::string text;
  const char* message;
};

class ExitTableMalformed : public testing::TestWithParam<Malformed> {};

TEST_P(ExitTableMalformed, IsRejectedWithOneLine) {
  try {
    parse(GetParam().text);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), GetParam().message);
  }
}

const std::string k_head = "# exitsim-exit-table v1\nthreshold,p_exit_1,p_exit_2\n";

INSTANTIATE_TEST_SUITE_P(
    Inputs, ExitTableMalformed,
    testing::Values(
        Malformed{"EmptyFile", "",
                  "t.csv:1: version: expected \"# exitsim-exit-table v1\", found an empty file"},
        Malformed{"OtherFormat", "threshold,p_exit_1\n0.5,1\n",
                  "t.csv:1: version: expected \"# exitsim-exit-table v1\", found "
                  "\"threshold,p_exit_1\""},
        Malformed{"OtherVersion", "# exitsim-exit-table v2\n",
                  "t.csv:1: version: expected \"# exitsim-exit-table v1\", found "
                  "\"# exitsim-exit-table v2\""},
        Malformed{"NoHeader", "# exitsim-exit-table v1\n",
                  "t.csv:2: header: expected the header row, found end of file"},
        Malformed{"HeaderFirstColumn", "# exitsim-exit-table v1\nconfidence,p_exit_1\n",
                  "t.csv:2:1: header: expected column \"threshold\", found \"confidence\""},
        Malformed{"HeaderWithoutExits", "# exitsim-exit-table v1\nthreshold\n",
                  "t.csv:2: header: expected at least one exit column (p_exit_1), found only "
                  "\"threshold\""},
        Malformed{"HeaderSkipsAColumn", "# exitsim-exit-table v1\nthreshold,p_exit_1,p_exit_3\n",
                  "t.csv:2:20: header: expected column \"p_exit_2\", found \"p_exit_3\""},
        Malformed{"NoRows", k_head,
                  "t.csv:3: row: expected at least one threshold row, found end of file"},
        Malformed{"TooFewFields", k_head + "0.5,1\n", "t.csv:3: row: expected 3 fields, found 2"},
        Malformed{"TooManyFields", k_head + "0.5,0.5,0.5,0\n",
                  "t.csv:3: row: expected 3 fields, found 4"},
        Malformed{"EmptyLine", k_head + "0.5,0.5,0.5\n\n0.6,0.5,0.5\n",
                  "t.csv:4: row: expected 3 fields, found an empty line"},
        Malformed{"ThresholdNotANumber", k_head + "high,0.5,0.5\n",
                  "t.csv:3:1: threshold: expected a finite number, found \"high\""},
        Malformed{"ThresholdEmpty", k_head + ",0.5,0.5\n",
                  "t.csv:3:1: threshold: expected a finite number, found an empty field"},
        Malformed{"ThresholdNan", k_head + "nan,0.5,0.5\n",
                  "t.csv:3:1: threshold: expected a finite number, found \"nan\""},
        Malformed{"ThresholdTrailingText", k_head + "0.5x,0.5,0.5\n",
                  "t.csv:3:1: threshold: expected a finite number, found \"0.5x\""},
        Malformed{"ThresholdsNotAscending", k_head + "0.6,0.5,0.5\n0.6,0.4,0.6\n",
                  "t.csv:4:1: threshold: expected a threshold above 0.6 (the previous row's), "
                  "found 0.6"},
        Malformed{"ProbabilityNotANumber", k_head + "0.5,0.5,half\n",
                  "t.csv:3:9: p_exit_2: expected a probability in [0, 1], found \"half\""},
        Malformed{"ProbabilityAboveOne", k_head + "0.5,1.5,-0.5\n",
                  "t.csv:3:5: p_exit_1: expected a probability in [0, 1], found 1.5"},
        Malformed{"ProbabilityNegative", k_head + "0.5,0.5,-0.5\n",
                  "t.csv:3:9: p_exit_2: expected a probability in [0, 1], found -0.5"},
        Malformed{"SumNotOne", k_head + "0.5,0.5,0.5\n0.7,0.5,0.4\n",
                  "t.csv:4: row: expected probabilities summing to 1, found a sum of 0.9"}),
    [](const testing::TestParamInfo<Malformed>& param_info) {
      return std::string(param_info.param.name);
    });

}  // namespace
}  // namespace exitsim::policy
