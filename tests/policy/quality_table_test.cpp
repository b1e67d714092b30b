// The quality table: what it reads, what it writes, and every malformed input.

#include "exitsim/policy/quality_table.hpp"

#include <gtest/gtest.h>

#include <sstream>
#include <stdexcept>

#include "exitsim/core/error.hpp"

namespace exitsim::policy {
namespace {

QualityTable parse(const std::string& text) {
  std::istringstream in(text);
  return QualityTable::parse(in, "q.csv");
}

const std::string k_header =
    "policy,strategy,measure,threshold,capacities,tokens,nll_per_token,top1_agreement,"
    "mean_exit_depth,";
const std::string k_head = "# exitsim-quality-table v2\n" + k_header + "p_exit_1,p_exit_2\n";

const std::string k_good =
    "# exitsim-quality-table v2\n" + k_header +
    "p_exit_1,p_exit_2,p_exit_3\n"
    "full_depth,full_depth,,,,40000,1.2345,1,31,0,0,1\n"
    "confidence,skip_kv,top1,0.5,,40000,1.31,0.982,18.2,0.55,0.3,0.15\n"
    "confidence,skip_kv,margin,0.2,,40000,1.3,0.99,19,0.5,0.3,0.2\n"
    "confidence,skip_kv,top1,0.9,,40000,1.25,0.9997,26,0.2,0.3,0.5\n"
    "router_expert_choice,skip_kv,,0.5,,40000,1.4,0.95,22,0.3,0.3,0.4\n"
    "router_expert_choice,skip_kv,,,1;0.67;0.33,40000,1.5,0.93,21,0.33,0.34,0.33\n";

QualityRow row(std::string policy, std::string measure, std::optional<double> threshold,
               std::vector<double> p_exit) {
  QualityRow r;
  r.strategy = policy == "full_depth" ? "full_depth" : "skip_kv";
  r.policy = std::move(policy);
  r.measure = std::move(measure);
  r.threshold = threshold;
  r.tokens = 100;
  r.nll_per_token = 1.5;
  r.top1_agreement = 0.75;
  r.mean_exit_depth = 12.5;
  r.p_exit = std::move(p_exit);
  return r;
}

TEST(QualityTable, AdaptiveThresholdRowsAreKeyedByMeasureAndInitialThreshold) {
  // `engine eval`'s adaptive_threshold rows name the measure and the threshold the estimator
  // starts from, as confidence rows do; the report finds a run's row by both.
  const QualityTable table =
      parse(k_head +
            "adaptive_threshold,deferred_fill,margin,0.9,,100,1.4,0.97,20,0.4,0.6\n"
            "adaptive_threshold,deferred_fill,top1,0.9,,100,1.5,0.95,18,0.5,0.5\n");
  const QualityRow* margin =
      find_quality_row(table, {"adaptive_threshold", "deferred_fill", "margin", 0.9, {}});
  ASSERT_NE(margin, nullptr);
  EXPECT_EQ(margin->nll_per_token, 1.4);
  const QualityRow* top1 =
      find_quality_row(table, {"adaptive_threshold", "deferred_fill", "top1", 0.9, {}});
  ASSERT_NE(top1, nullptr);
  EXPECT_EQ(top1->nll_per_token, 1.5);
  EXPECT_EQ(find_quality_row(table, {"adaptive_threshold", "deferred_fill", "margin", 0.7, {}}),
            nullptr);
  // Without its measure the row is refused like a confidence row.
  EXPECT_THROW(parse(k_head + "adaptive_threshold,deferred_fill,,0.9,,100,1.4,0.97,20,0.4,0.6\n"),
               InputError);
}

TEST(QualityTable, ReadsEveryColumn) {
  const QualityTable table = parse(k_good);
  EXPECT_EQ(table.source(), "q.csv");
  EXPECT_EQ(table.exit_points(), 3u);
  ASSERT_EQ(table.rows().size(), 6u);
  const QualityRow& full = table.rows()[0];
  EXPECT_EQ(full.policy, "full_depth");
  EXPECT_EQ(full.measure, "");
  EXPECT_FALSE(full.threshold.has_value());
  EXPECT_TRUE(full.capacities.empty());
  EXPECT_EQ(full.tokens, 40000);
  EXPECT_EQ(full.nll_per_token, 1.2345);
  EXPECT_EQ(full.top1_agreement, 1.0);
  EXPECT_EQ(full.mean_exit_depth, 31.0);
  EXPECT_EQ(full.p_exit, (std::vector<double>{0, 0, 1}));
  const QualityRow& top1 = table.rows()[1];
  EXPECT_EQ(top1.measure, "top1");
  EXPECT_EQ(top1.threshold, 0.5);
  EXPECT_EQ(table.rows()[5].capacities, (std::vector<double>{1, 0.67, 0.33}));
}

TEST(QualityTable, WritesWhatItReads) {
  QualityRow capacities = row("router_expert_choice", "", std::nullopt, {0.5, 0.5});
  capacities.capacities = {1.0, 1.0 / 3};
  const QualityTable table(
      {row("full_depth", "", std::nullopt, {0, 1}),
       row("confidence", "margin", 0.30000000000000004, {1.0 / 3, 2.0 / 3}), capacities},
      "mem");
  std::ostringstream out;
  table.write(out);
  EXPECT_EQ(out.str(),
            k_head +
                "full_depth,full_depth,,,,100,1.5,0.75,12.5,0,1\n"
                "confidence,skip_kv,margin,0.30000000000000004,,100,1.5,0.75,12.5,"
                "0.3333333333333333,"
                "0.6666666666666666\n"
                "router_expert_choice,skip_kv,,,1;0.3333333333333333,100,1.5,0.75,12.5,0.5,0.5\n");
  EXPECT_EQ(parse(out.str()), table);

  std::ostringstream again;
  parse(k_good).write(again);
  EXPECT_EQ(again.str(), k_good);
}

TEST(QualityTable, ToleratesCarriageReturnsAndSpaces) {
  const QualityTable table = parse(
      "# exitsim-quality-table v2\r\n"
      "policy, strategy ,measure ,threshold,capacities,tokens,nll_per_token,top1_agreement,"
      "mean_exit_depth,\tp_exit_1\r\n"
      " none , skip_kv ,, , ,7,\t0.5,1,4,1\r\n");
  ASSERT_EQ(table.rows()[0].strategy, "skip_kv");
  ASSERT_EQ(table.rows().size(), 1u);
  EXPECT_EQ(table.rows()[0].policy, "none");
  EXPECT_EQ(table.rows()[0].tokens, 7);
}

TEST(QualityTable, ConstructorAppliesTheReadersRules) {
  EXPECT_THROW(QualityTable({}), std::invalid_argument);
  EXPECT_THROW(QualityTable({row("full_depth", "", std::nullopt, {})}), std::invalid_argument);
  EXPECT_THROW(QualityTable({row("full_depth", "", std::nullopt, {1}),
                             row("none", "", std::nullopt, {0.5, 0.5})}),
               std::invalid_argument);
  try {
    const QualityTable table(
        {row("full_depth", "", std::nullopt, {1}), row("full_depth", "top1", 0.5, {1})}, "mem");
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(),
                 "quality table mem: row 2: measure: expected an empty field (only confidence and "
                 "adaptive_threshold rows have a measure), found \"top1\"");
  }
}

TEST(QualityTable, MissingFileIsAnInputError) {
  try {
    QualityTable::read("/nonexistent/quality.csv");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "/nonexistent/quality.csv: cannot open the quality table for reading");
  }
}

struct Malformed {
  const char* name;
  std::string text;
  const char* message;
};

class QualityTableMalformed : public testing::TestWithParam<Malformed> {};

TEST_P(QualityTableMalformed, IsRejectedWithOneLine) {
  try {
    parse(GetParam().text);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), GetParam().message);
  }
}

// A valid row's fields after the policy, measure, threshold and capacities.
const std::string k_rest = "10,1.5,0.9,12,0.5,0.5";

INSTANTIATE_TEST_SUITE_P(
    Inputs, QualityTableMalformed,
    testing::Values(
        Malformed{"EmptyFile", "",
                  "q.csv:1: version: expected \"# exitsim-quality-table v2\", found an empty file"},
        Malformed{"ExitTable", "# exitsim-exit-table v1\nthreshold,p_exit_1\n",
                  "q.csv:1: version: expected \"# exitsim-quality-table v2\", found "
                  "\"# exitsim-exit-table v1\""},
        Malformed{"NoHeader", "# exitsim-quality-table v2\n",
                  "q.csv:2: header: expected the header row, found end of file"},
        Malformed{"HeaderRenamedColumn",
                  "# exitsim-quality-table v2\npolicy,strategy,measure,setting,capacities\n",
                  "q.csv:2:25: header: expected column \"threshold\", found \"setting\""},
        Malformed{"HeaderCut", "# exitsim-quality-table v2\npolicy,strategy,measure\n",
                  "q.csv:2: header: expected column \"threshold\", found the end of the header"},
        Malformed{"HeaderWithoutExits", "# exitsim-quality-table v2\n" + k_header.substr(0, 96),
                  "q.csv:2: header: expected at least one exit column (p_exit_1), found nothing "
                  "after \"mean_exit_depth\""},
        Malformed{"HeaderSkipsAnExit", "# exitsim-quality-table v2\n" + k_header + "p_exit_2\n",
                  "q.csv:2:98: header: expected column \"p_exit_1\", found \"p_exit_2\""},
        Malformed{"NoRows", k_head,
                  "q.csv:3: row: expected at least one setting row, found end of file"},
        Malformed{"TooFewFields", k_head + "none,skip_kv,,,,10,1.5,0.9,12,1\n",
                  "q.csv:3: row: expected 11 fields, found 10"},
        Malformed{"EmptyLine", k_head + "\n",
                  "q.csv:3: row: expected 11 fields, found an empty line"},
        Malformed{"UnknownPolicy", k_head + "confidance,skip_kv,top1,0.5,," + k_rest + "\n",
                  "q.csv:3:1: policy: expected full_depth or an exit policy (none, confidence, "
                  "adaptive_threshold, router_expert_choice, router_token_choice, oracle, "
                  "position_schedule, replay, distribution), found \"confidance\""},
        Malformed{"ConfidenceWithoutMeasure", k_head + "confidence,skip_kv,,0.5,," + k_rest + "\n",
                  "q.csv:3:20: measure: expected \"top1\" or \"margin\" (a confidence row's "
                  "measure), found an empty field"},
        Malformed{"UnknownMeasure", k_head + "confidence,skip_kv,entropy,0.5,," + k_rest + "\n",
                  "q.csv:3:20: measure: expected \"top1\" or \"margin\" (a confidence row's "
                  "measure), found \"entropy\""},
        Malformed{"MeasureElsewhere", k_head + "oracle,skip_kv,top1,,," + k_rest + "\n",
                  "q.csv:3:16: measure: expected an empty field (only confidence and "
                  "adaptive_threshold rows have a measure), found \"top1\""},
        Malformed{"ConfidenceWithoutThreshold",
                  k_head + "confidence,skip_kv,top1,,," + k_rest + "\n",
                  "q.csv:3:25: threshold: expected a confidence threshold, found an empty field"},
        Malformed{"ThresholdNotANumber", k_head + "confidence,skip_kv,top1,high,," + k_rest + "\n",
                  "q.csv:3:25: threshold: expected a finite number, found \"high\""},
        Malformed{"ThresholdInfinite", k_head + "confidence,skip_kv,top1,inf,," + k_rest + "\n",
                  "q.csv:3:25: threshold: expected a finite number, found \"inf\""},
        Malformed{"ThresholdAndCapacities",
                  k_head + "router_expert_choice,skip_kv,,0.5,1;0.5," + k_rest + "\n",
                  "q.csv:3:35: capacities: expected an empty field (a row has a threshold or "
                  "capacities, not both), found \"1;0.5\""},
        Malformed{"CapacitiesEmptyPart",
                  k_head + "router_expert_choice,skip_kv,,,1;;0.5," + k_rest + "\n",
                  "q.csv:3:32: capacities: expected capacities in (0, 1] separated by \";\", "
                  "found \"1;;0.5\""},
        Malformed{"CapacitiesCommaless",
                  k_head + "router_expert_choice,skip_kv,,,1 0.5," + k_rest + "\n",
                  "q.csv:3:32: capacities: expected capacities in (0, 1] separated by \";\", "
                  "found \"1 0.5\""},
        Malformed{"CapacityZero", k_head + "router_expert_choice,skip_kv,,,1;0," + k_rest + "\n",
                  "q.csv:3:32: capacities: expected capacities in (0, 1] separated by \";\", "
                  "found \"1;0\""},
        Malformed{"TokensFractional", k_head + "none,skip_kv,,,,12.5,1.5,0.9,12,0.5,0.5\n",
                  "q.csv:3:17: tokens: expected a token count of at least 1, found \"12.5\""},
        Malformed{"TokensZero", k_head + "none,skip_kv,,,,0,1.5,0.9,12,0.5,0.5\n",
                  "q.csv:3:17: tokens: expected a token count of at least 1, found 0"},
        Malformed{"TokensOverflow",
                  k_head + "none,skip_kv,,,,99999999999999999999,1.5,0.9,12,0.5,0.5\n",
                  "q.csv:3:17: tokens: expected a token count of at least 1, found "
                  "\"99999999999999999999\""},
        Malformed{"NllNegative", k_head + "none,skip_kv,,,,10,-0.5,0.9,12,0.5,0.5\n",
                  "q.csv:3:20: nll_per_token: expected a non-negative number of nats, found -0.5"},
        Malformed{"NllNan", k_head + "none,skip_kv,,,,10,nan,0.9,12,0.5,0.5\n",
                  "q.csv:3:20: nll_per_token: expected a non-negative number of nats, found "
                  "\"nan\""},
        Malformed{"AgreementAboveOne", k_head + "none,skip_kv,,,,10,1.5,1.25,12,0.5,0.5\n",
                  "q.csv:3:24: top1_agreement: expected a fraction in [0, 1], found 1.25"},
        Malformed{"DepthNegative", k_head + "none,skip_kv,,,,10,1.5,0.9,-1,0.5,0.5\n",
                  "q.csv:3:28: mean_exit_depth: expected a non-negative number of layers, found "
                  "-1"},
        Malformed{"ProbabilityNotANumber", k_head + "none,skip_kv,,,,10,1.5,0.9,12,0.5,half\n",
                  "q.csv:3:35: p_exit_2: expected a probability in [0, 1], found \"half\""},
        Malformed{"ProbabilityAboveOne", k_head + "none,skip_kv,,,,10,1.5,0.9,12,1.5,-0.5\n",
                  "q.csv:3:31: p_exit_1: expected a probability in [0, 1], found 1.5"},
        Malformed{"SumNotOne", k_head + "none,skip_kv,,,,10,1.5,0.9,12,0.5,0.4\n",
                  "q.csv:3: row: expected probabilities summing to 1, found a sum of 0.9"},
        Malformed{"ThresholdsNotAscending",
                  k_head + "confidence,skip_kv,top1,0.9,," + k_rest +
                      "\nconfidence,skip_kv,margin,0.1,," + k_rest +
                      "\nconfidence,skip_kv,top1,0.9,," + k_rest + "\n",
                  "q.csv:5:25: threshold: expected a threshold above 0.9 (the previous confidence "
                  "top1 row's under skip_kv), found 0.9"},
        Malformed{"SettingTwice",
                  k_head + "full_depth,full_depth,,,," + k_rest + "\nnone,skip_kv,,,," + k_rest +
                      "\nfull_depth,full_depth,,,," + k_rest + "\n",
                  "q.csv:5: row: expected one row per setting, found a second full_depth row"},
        Malformed{"StrategyUnknown", k_head + "confidence,skip,top1,0.5,," + k_rest + "\n",
                  "q.csv:3:12: strategy: expected a synchronization strategy that lets tokens "
                  "exit (batch_sync, state_copy, deferred_fill, skip_kv, shared_kv, depthwise), "
                  "found \"skip\""},
        Malformed{"ExitRowUnderFullDepth",
                  k_head + "confidence,full_depth,top1,0.5,," + k_rest + "\n",
                  "q.csv:3:12: strategy: expected a synchronization strategy that lets tokens "
                  "exit (batch_sync, state_copy, deferred_fill, skip_kv, shared_kv, depthwise), "
                  "found \"full_depth\""},
        Malformed{"FullDepthRowUnderAStrategy", k_head + "full_depth,skip_kv,,,," + k_rest + "\n",
                  "q.csv:3:12: strategy: expected full_depth (the full_depth row's strategy), "
                  "found \"skip_kv\""},
        Malformed{"CapacitiesTwice",
                  k_head + "router_expert_choice,skip_kv,,,1;0.5," + k_rest +
                      "\nrouter_expert_choice,skip_kv,,,1;0.50," + k_rest + "\n",
                  "q.csv:4: row: expected one row per setting, found a second "
                  "router_expert_choice row under skip_kv with capacities 1;0.5"}),
    [](const testing::TestParamInfo<Malformed>& param_info) {
      return std::string(param_info.param.name);
    });

// The join between a simulated run and a measured row is defined once (QualitySetting): a
// threshold under one strategy never finds the row of another, and no-op settings are the
// full-depth reference.
TEST(QualityTable, RowsAreFoundBySettingAndStrategyTogether) {
  const QualityTable table = parse(k_head +
                                   "full_depth,full_depth,,,,10,1.2,1,2,0,1\n"
                                   "confidence,skip_kv,top1,0.5,,10,1.5,0.9,1.5,0.5,0.5\n"
                                   "confidence,state_copy,top1,0.5,,10,1.4,0.95,1.5,0.5,0.5\n");
  const QualityRow* skip = find_quality_row(table, {"confidence", "skip_kv", "top1", 0.5, {}});
  const QualityRow* copy = find_quality_row(table, {"confidence", "state_copy", "top1", 0.5, {}});
  ASSERT_NE(skip, nullptr);
  ASSERT_NE(copy, nullptr);
  EXPECT_EQ(skip->nll_per_token, 1.5);
  EXPECT_EQ(copy->nll_per_token, 1.4);
  EXPECT_EQ(find_quality_row(table, {"confidence", "batch_sync", "top1", 0.5, {}}), nullptr);
  EXPECT_EQ(find_quality_row(table, {"confidence", "skip_kv", "top1", 0.5 + 1e-12, {}}), skip);
  EXPECT_EQ(find_quality_row(table, {"confidence", "skip_kv", "margin", 0.5, {}}), nullptr);
  // A threshold under full_depth, or exit policy none, is the reference row.
  const QualityRow* reference =
      find_quality_row(table, {"confidence", "full_depth", "top1", 0.5, {}});
  ASSERT_NE(reference, nullptr);
  EXPECT_EQ(reference->policy, "full_depth");
  EXPECT_EQ(find_quality_row(table, {"none", "skip_kv", "", std::nullopt, {}}), reference);
  EXPECT_EQ(canonical({"confidence", "full_depth", "top1", 0.9, {}}), full_depth_setting());
}

}  // namespace
}  // namespace exitsim::policy
