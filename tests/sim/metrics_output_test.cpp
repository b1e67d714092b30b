#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "exitsim/core/error.hpp"
#include "exitsim/sim/metrics/metrics.hpp"
#include "exitsim/traces/atomic_output.hpp"
#include "support/test_files.hpp"

namespace exitsim::sim {
namespace {

using test_support::read_file;
using test_support::TempDir;

RequestRecord request(std::uint64_t id, int replica, TimeNs arrival, TimeNs scheduled,
                      TimeNs first_token, TimeNs completion, std::int64_t outputs) {
  RequestRecord r;
  r.id = RequestId(id);
  r.replica = replica;
  r.arrival = arrival;
  r.first_scheduled = scheduled;
  r.first_token = first_token;
  r.completion = completion;
  r.input_tokens = 10 + static_cast<std::int64_t>(id);
  r.output_tokens = outputs;
  return r;
}

// Feeds a small run (requests, gaps, iterations) into `collector`.
void feed(MetricsCollector& collector) {
  RequestRecord slow = request(7, 1, 0, 1'000'000, 10'000'500, 40'000'500, 4);
  slow.preemptions = 2;
  collector.record_request(slow);
  collector.record_request(request(3, 0, 5'000'000, 10'000'000, 30'000'000, 30'000'000, 1));
  collector.record_request(request(9, 0, 20'000'000, 40'000'000, 50'000'000, 100'000'001, 3));
  for (TimeNs gap : {10'000'000, 10'000'000, 10'000'000, 25'000'000, 25'000'001})
    collector.record_token_gap(gap);
  for (TimeNs t = 0; t < 100'000'001; t += 5'000'000) {
    IterationRecord it;
    it.replica = static_cast<int>((t / 5'000'000) % 2);
    it.start = t;
    it.duration = 4'000'000;
    it.sequences = 1 + (t / 5'000'000) % 3;
    it.kv_blocks_used = (t / 5'000'000) % 7;
    it.kv_blocks_total = 8;
    collector.record_iteration(it);
  }
  collector.record_preemption();
  collector.record_preemption();
}

MetricsOptions options_with(const std::string& csv_path) {
  MetricsOptions options;
  options.replicas = 2;
  options.series_window = 10'000'000;
  options.requests_csv_path = csv_path;
  options.slo.ttft_ms = 28;
  options.slo.tpot_ms = 20;
  return options;
}

TEST(MetricsOutput, RequestCsvHoldsOneExactRowPerRequestInCompletionOrder) {
  TempDir dir;
  const std::string path = dir.path("requests.csv");
  MetricsCollector collector(options_with(path));
  feed(collector);
  EXPECT_FALSE(std::filesystem::exists(path)) << "the CSV must not appear before finish()";
  collector.finish();
  EXPECT_EQ(read_file(path),
            "request_id,replica,arrival_ns,first_scheduled_ns,first_token_ns,completion_ns,"
            "input_tokens,output_tokens,preemptions,ttft_ms,tpot_ms,e2e_ms\n"
            "7,1,0,1000000,10000500,40000500,17,4,2,10.000500,10.000000,40.000500\n"
            "3,0,5000000,10000000,30000000,30000000,13,1,0,25.000000,,25.000000\n"
            "9,0,20000000,40000000,50000000,100000001,19,3,0,30.000000,25.000001,80.000001\n");
  EXPECT_FALSE(std::filesystem::exists(traces::detail::AtomicOutputFile::temp_path_for(path)));
  collector.finish();  // a second finish() is harmless
}

TEST(MetricsOutput, AnUnfinishedRunLeavesNoCsv) {
  TempDir dir;
  const std::string path = dir.path("requests.csv");
  {
    MetricsCollector collector(options_with(path));
    feed(collector);
  }
  EXPECT_TRUE(std::filesystem::is_empty(dir.dir()));
}

TEST(MetricsOutput, WithoutAPathNoCsvIsWritten) {
  TempDir dir;
  MetricsCollector collector(options_with(""));
  feed(collector);
  collector.finish();
  EXPECT_TRUE(std::filesystem::is_empty(dir.dir()));
}

TEST(MetricsOutput, AnUncreatableCsvIsAnInputErrorNamingThePath) {
  TempDir dir;
  const std::string path = dir.path("missing/requests.csv");
  const std::string error = test_support::error_of([&] { MetricsCollector c(options_with(path)); });
  EXPECT_NE(error.find(path), std::string::npos) << error;
  EXPECT_NE(error.find("cannot create"), std::string::npos) << error;
}

TEST(MetricsOutput, JsonIsDeterministicAndFollowsTheSchema) {
  MetricsCollector a(options_with("")), b(options_with(""));
  feed(a);
  feed(b);
  const std::string json = summary_to_json(a.summarize());
  EXPECT_EQ(json, summary_to_json(b.summarize()));
  EXPECT_EQ(json, summary_to_json(a.summarize()));

  const nlohmann::ordered_json j = nlohmann::ordered_json::parse(json);
  std::vector<std::string> keys;
  for (const auto& item : j.items())
    keys.push_back(item.key());
  const std::vector<std::string> expected_keys{"schema",
                                               "exitsim",
                                               "requests",
                                               "input_tokens",
                                               "output_tokens",
                                               "first_arrival_ns",
                                               "last_completion_ns",
                                               "makespan_ns",
                                               "makespan_s",
                                               "throughput_tokens_per_s",
                                               "request_throughput_per_s",
                                               "goodput_requests_per_s",
                                               "slo",
                                               "ttft_ms",
                                               "tpot_ms",
                                               "itl_ms",
                                               "e2e_ms",
                                               "queueing_ms",
                                               "percentile_relative_error",
                                               "iterations",
                                               "preemptions",
                                               "recomputed_tokens",
                                               "rejected_requests",
                                               "mean_batch_size",
                                               "batch_size_histogram",
                                               "depth",
                                               "series",
                                               "warnings"};
  EXPECT_EQ(keys, expected_keys);
  EXPECT_EQ(j["schema"], "exitsim-metrics v1");
  EXPECT_EQ(j["requests"], 3);
  EXPECT_EQ(j["output_tokens"], 8);
  EXPECT_EQ(j["makespan_ns"], 100'000'001);
  EXPECT_EQ(j["slo"]["ttft_ms"], 28.0);
  EXPECT_TRUE(j["slo"]["e2e_ms"].is_null());
  // ttft: 10.0005, 25, 30 ms; tpot: 10, 25.000001 ms (the one-token request has none): request
  // 9 misses both targets, the other two meet both.
  EXPECT_DOUBLE_EQ(j["slo"]["attainment"].get<double>(), 2.0 / 3);
  EXPECT_DOUBLE_EQ(j["slo"]["attainment_by_metric"]["ttft"].get<double>(), 2.0 / 3);
  EXPECT_DOUBLE_EQ(j["slo"]["attainment_by_metric"]["tpot"].get<double>(), 2.0 / 3);
  EXPECT_FALSE(j["slo"]["attainment_by_metric"].contains("e2e"));
  EXPECT_EQ(j["ttft_ms"]["count"], 3);
  EXPECT_DOUBLE_EQ(j["ttft_ms"]["max"].get<double>(), 30.0);
  EXPECT_EQ(j["tpot_ms"]["count"], 2);
  EXPECT_EQ(j["itl_ms"]["count"], 5);
  EXPECT_DOUBLE_EQ(j["itl_ms"]["max"].get<double>(), 25.000001);
  EXPECT_EQ(j["preemptions"], 2);
  EXPECT_EQ(j["iterations"], 21);
  EXPECT_EQ(j["batch_size_histogram"].dump(), R"({"1":7,"2":7,"3":7})");
  EXPECT_DOUBLE_EQ(j["mean_batch_size"].get<double>(), 2.0);
  EXPECT_EQ(j["series"]["window_ns"], 10'000'000);
  ASSERT_EQ(j["series"]["points"].size(), 11u);  // iterations end at 104 ms
  EXPECT_EQ(j["series"]["points"][0]["start_ns"], 0);
  // Replica 0 runs [0, 4) ms, replica 1 [5, 9) ms: 8 busy ms of 2 x 10 replica-ms.
  EXPECT_DOUBLE_EQ(j["series"]["points"][0]["utilization"].get<double>(), 0.4);
}

TEST(MetricsOutput, EmptySummaryIsValidJson) {
  const std::string json = summary_to_json(MetricsCollector(MetricsOptions{}).summarize());
  const nlohmann::json j = nlohmann::json::parse(json);
  EXPECT_EQ(j["requests"], 0);
  EXPECT_TRUE(j["series"]["points"].empty());
  EXPECT_TRUE(j["batch_size_histogram"].is_object());
  EXPECT_TRUE(j["slo"]["attainment_by_metric"].is_object());
}

TEST(MetricsOutput, ReadableSummaryNamesEveryFigure) {
  MetricsCollector collector(options_with(""));
  feed(collector);
  const std::string text = format_summary(collector.summarize());
  for (const char* expected :
       {"requests        3 (49 input tokens, 8 output tokens)\n",
        "makespan        0.100 s (first arrival to last completion)\n",
        "throughput      80.00 output tokens/s, 30.000 requests/s\n",
        "goodput         20.000 requests/s meeting every SLO\n",
        "SLO attainment  66.67% meet every target (ttft <= 28 ms: 66.67%, tpot <= 20 ms: 66.67%)\n",
        "  TTFT               3", "  TPOT               2", "  ITL                5",
        "  E2E                3", "  queueing           3",
        "batches         21 iterations, mean batch size 2.00 sequences\n", "preemptions     2\n",
        "within 0.5% relative error"}) {
    EXPECT_NE(text.find(expected), std::string::npos) << "missing: " << expected << "\n" << text;
  }
  EXPECT_EQ(text, format_summary(collector.summarize()));
}

TEST(MetricsOutput, ReadableSummaryWithoutTargetsOrSamples) {
  const std::string text = format_summary(MetricsCollector(MetricsOptions{}).summarize());
  EXPECT_NE(text.find("no targets"), std::string::npos) << text;
  EXPECT_NE(text.find("  TPOT               0          -"), std::string::npos) << text;
}

}  // namespace
}  // namespace exitsim::sim
