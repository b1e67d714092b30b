// The report's JSON inputs (--plan, --validation) under exitsim's JSON limits, every key the
// report reads checked for its type before any section reads it (N10, N1).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "exitsim/analysis/report.hpp"
#include "exitsim/analysis/validation.hpp"
#include "support/test_files.hpp"

namespace exitsim::analysis {
namespace {

using nlohmann::json;
using test_support::error_of;

// What `exitsim validate` writes for one strategy over two engine runs, with a speed probe.
json written_validation() {
  std::vector<EngineRunMeasurement> runs(2);
  for (EngineRunMeasurement& run : runs) {
    run.summary.throughput_tokens_per_s = 100;
    run.summary.ttft.p50 = 10;
    run.iterations = {1000, 1000};
    run.priced_steps = {1020, 1020};
  }
  sim::MetricsSummary simulated;
  simulated.throughput_tokens_per_s = 107;
  const std::vector<TimeNs> iterations = {1000, 1000};
  const std::vector<ValidationResult> results = {
      compare_runs("state_copy", runs, simulated, iterations)};
  ValidationConditions conditions;
  conditions.hardware = "cpu";
  conditions.repeats = 2;
  conditions.speed = {100, 101, 102, 0.10, false, 1};
  return json::parse(validation_json(results, conditions));
}

// Every number in `value` written as a string, as a hand-edited or re-serialized file might.
void quote_numbers(json& value) {
  if (value.is_number()) {
    value = value.dump();
    return;
  }
  if (value.is_structured()) {
    for (json& element : value)
      quote_numbers(element);
  }
}

std::string validation_error(const json& validation) {
  ReportInputs in;
  in.validation_json = validation.dump();
  in.validation_path = "val.json";
  return error_of([&] { (void)build_report(in); });
}

TEST(ReportInputs, TheWrittenValidationIsRead) {
  ReportInputs in;
  in.validation_json = written_validation().dump();
  in.validation_path = "val.json";
  EXPECT_NE(build_report(in).html.find("state_copy"), std::string::npos);
}

// N10: `internal error: [json.exception.type_error.302] type must be number, but is string`.
TEST(ReportInputs, AValidationWithNumbersWrittenAsStringsIsRefusedByKeyPath) {
  json all_quoted = written_validation();
  quote_numbers(all_quoted);
  EXPECT_EQ(validation_error(all_quoted),
            "val.json: repeats: expected an integer from 0 to 2147483647, found \"2\"");
  json one_quoted = written_validation();
  one_quoted["strategies"][0]["metrics"][1]["engine_runs"] = "2";
  EXPECT_EQ(validation_error(one_quoted),
            "val.json: strategies[0].metrics[1].engine_runs: expected an integer from 0 to "
            "2147483647, found \"2\"");
  json median = written_validation();
  median["strategies"][0]["same_batches"]["median_ape"] = "0.02";
  EXPECT_EQ(validation_error(median),
            "val.json: strategies[0].same_batches.median_ape: expected a number (or null), found "
            "\"0.02\"");
  json speed = written_validation();
  speed["speed"]["normalized"] = 0;
  EXPECT_EQ(validation_error(speed), "val.json: speed.normalized: expected true or false, found 0");
}

// N1 through --validation: 100,000 levels are refused at the 33rd.
TEST(ReportInputs, ADeeplyNestedValidationIsRefused) {
  ReportInputs in;
  in.validation_json = std::string(100000, '[') + std::string(100000, ']');
  in.validation_path = "val.json";
  EXPECT_EQ(error_of([&] { (void)build_report(in); }),
            "val.json: expected at most 32 levels of nesting, found deeper nesting at byte 33");
}

std::string plan_with(const std::string& candidate) {
  return R"({"format": "exitsim-plan v1", "recommendation": "r", "candidates": [)" + candidate +
         "]}";
}

constexpr const char* k_candidate =
    R"({"candidate": "", "load_key": "workload.arrivals.rate", "max_load_per_replica": 4, )"
    R"("tpot_p99_ms_at_max": 30, "replicas": 2, "cost_per_hour": COST, "recommended": true})";

std::string candidate_with_cost(const std::string& cost) {
  std::string text = k_candidate;
  text.replace(text.find("COST"), 4, cost);
  return text;
}

TEST(ReportInputs, APlanIsCheckedByKeyPathAndANullCostIsShownAsMissing) {
  ReportInputs in;
  in.plan_path = "plan.json";
  in.plan_json = plan_with(candidate_with_cost("\"3\""));
  EXPECT_EQ(error_of([&] { (void)build_report(in); }),
            "plan.json: candidates[0].cost_per_hour: expected a number (or null), found \"3\"");
  in.plan_json = plan_with(R"({"candidate": "x"})");
  EXPECT_EQ(error_of([&] { (void)build_report(in); }),
            "plan.json: candidates[0].load_key: expected a string, found none");
  // An infinite cost is written as null by nlohmann: shown as "-", not an internal error.
  in.plan_json = plan_with(candidate_with_cost("null"));
  EXPECT_NE(build_report(in).html.find("<td>(scenario)</td><td>4</td><td>30</td><td>2</td>"
                                       "<td>-</td>"),
            std::string::npos);
}

}  // namespace
}  // namespace exitsim::analysis
