#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "exitsim/core/error.hpp"
#include "exitsim/sim/workload/arrivals.hpp"
#include "exitsim/sim/workload/synthetic_source.hpp"
#include "exitsim/sim/workload/trace_replay_source.hpp"
#include "exitsim/sim/workload/workload.hpp"
#include "support/request_traces.hpp"

namespace exitsim::sim {
namespace {

using test_support::shared_trace;
using test_support::TempDir;

// Four requests at +0, +0.5, +1.25 and +4 seconds.
const char* const k_azure_fixture =
    "TIMESTAMP,ContextTokens,GeneratedTokens\n"
    "2023-11-16 18:15:46.0000000,374,44\n"
    "2023-11-16 18:15:46.5000000,396,109\n"
    "2023-11-16 18:15:47.2500000,879,5\n"
    "2023-11-16 18:15:50.0000000,91,250";

const char* const k_vidur_fixture =
    "num_prefill_tokens,num_decode_tokens,num_total_tokens,pd_ratio\n"
    "3772,54,3826,69.85\n2015,156,2171,12.91\n100,10,110,10\n";

std::vector<RequestDescriptor> drain(traces::RequestSource& source) {
  std::vector<RequestDescriptor> out;
  while (std::optional<RequestDescriptor> request = source.next())
    out.push_back(*request);
  EXPECT_FALSE(source.next().has_value());  // stays exhausted
  return out;
}

std::vector<TimeNs> arrivals_of(const std::vector<RequestDescriptor>& requests) {
  std::vector<TimeNs> out;
  for (const RequestDescriptor& r : requests)
    out.push_back(r.arrival.value());
  return out;
}

scenario::WorkloadConfig synthetic(std::int64_t requests) {
  scenario::WorkloadConfig c;
  c.source = "synthetic";
  c.requests = requests;
  c.arrivals.process = "poisson";
  c.arrivals.rate = 20.0;
  c.input_tokens.dist = "lognormal";
  c.input_tokens.mean = 400.0;
  c.input_tokens.sigma = 0.7;
  c.output_tokens.dist = "uniform";
  c.output_tokens.min = 10;
  c.output_tokens.max = 90;
  return c;
}

scenario::WorkloadConfig replay(const std::string& path) {
  scenario::WorkloadConfig c;
  c.source = "trace";
  c.trace.path = path;
  c.trace.format = "auto";
  return c;
}

std::string error_of(const scenario::WorkloadConfig& c) {
  return test_support::error_of([&] { make_workload(c, 1); });
}

// An in-memory trace, for exercising the replay wrapper without a file.
std::unique_ptr<traces::RequestSource> vector_source(std::vector<RequestDescriptor> requests,
                                                     bool has_arrivals) {
  return std::make_unique<test_support::VectorSource>(
      std::move(requests),
      test_support::VectorSourceReport{.skipped_rows = 3, .has_arrivals = has_arrivals});
}

RequestDescriptor request(std::uint64_t id, std::optional<TimeNs> arrival) {
  return RequestDescriptor{RequestId(id), arrival, 10, 5};
}

TEST(SyntheticWorkload, ProducesTheConfiguredRequests) {
  const auto source = make_workload(synthetic(2000), 42);
  EXPECT_TRUE(source->has_arrivals());
  EXPECT_EQ(source->format_name(), "synthetic");
  const std::vector<RequestDescriptor> requests = drain(*source);
  ASSERT_EQ(requests.size(), 2000u);
  EXPECT_EQ(requests.front().arrival, 0);
  for (std::size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(requests[i].id.value, i);
    if (i > 0) {
      EXPECT_GE(*requests[i].arrival, *requests[i - 1].arrival);
    }
    EXPECT_GE(requests[i].input_tokens, 1);
    EXPECT_GE(requests[i].output_tokens, 10);
    EXPECT_LE(requests[i].output_tokens, 90);
  }
  EXPECT_EQ(source->skipped_rows(), 0);
  // 1999 gaps at 20/s: relative standard error ~2.2%.
  const double rate = 1999.0 / to_seconds(*requests.back().arrival);
  EXPECT_NEAR(rate, 20.0, 20.0 * 0.1);
}

TEST(SyntheticWorkload, IsDeterministicPerSeed) {
  const auto a = drain(*make_workload(synthetic(500), 7));
  EXPECT_EQ(a, drain(*make_workload(synthetic(500), 7)));
  EXPECT_NE(a, drain(*make_workload(synthetic(500), 8)));
}

TEST(SyntheticWorkload, ChangingOneComponentLeavesTheOthersStreamsAlone) {
  const auto base = drain(*make_workload(synthetic(500), 7));
  scenario::WorkloadConfig changed = synthetic(500);
  changed.output_tokens.dist = "lognormal";
  changed.output_tokens.mean = 50.0;
  changed.output_tokens.sigma = 1.5;
  changed.output_tokens.max = 0;
  const auto other = drain(*make_workload(changed, 7));
  ASSERT_EQ(other.size(), base.size());
  int output_differs = 0;
  for (std::size_t i = 0; i < base.size(); ++i) {
    EXPECT_EQ(other[i].arrival, base[i].arrival);
    EXPECT_EQ(other[i].input_tokens, base[i].input_tokens);
    output_differs += other[i].output_tokens != base[i].output_tokens;
  }
  EXPECT_GT(output_differs, 400);
}

TEST(SyntheticWorkload, UsesTheNamedArrivalStream) {
  const auto requests = drain(*make_workload(synthetic(100), 9));
  PoissonArrivals expected(20.0, RandomStream(9, k_arrivals_stream));
  for (const RequestDescriptor& r : requests)
    ASSERT_EQ(*r.arrival, expected.next());
}

TEST(TraceReplaySource, DividesArrivalsByTheScaleRoundingToNearest) {
  std::vector<RequestDescriptor> trace = {request(4, 0), request(5, 3), request(6, 1'000'001)};
  TraceReplaySource source(vector_source(trace, true), 2.0, 0, nullptr);
  const auto requests = drain(source);
  EXPECT_EQ(arrivals_of(requests), (std::vector<TimeNs>{0, 2, 500'001}));
  EXPECT_EQ(requests[1].id.value, 5u);
  EXPECT_EQ(requests[1].input_tokens, 10);
  EXPECT_EQ(source.skipped_rows(), 3);
  EXPECT_EQ(source.format_name(), "vector");
  EXPECT_TRUE(source.has_arrivals());
}

TEST(TraceReplaySource, StopsAtTheCap) {
  std::vector<RequestDescriptor> trace = {request(0, 0), request(1, 10), request(2, 20)};
  TraceReplaySource capped(vector_source(trace, true), 1.0, 2, nullptr);
  EXPECT_EQ(drain(capped).size(), 2u);
  TraceReplaySource whole(vector_source(trace, true), 1.0, 0, nullptr);
  EXPECT_EQ(drain(whole).size(), 3u);
}

TEST(TraceReplaySource, AssignsAndScalesArrivalsForLengthOnlyTraces) {
  std::vector<RequestDescriptor> trace = {request(0, std::nullopt), request(1, std::nullopt)};
  TraceReplaySource source(vector_source(trace, false), 4.0, 0,
                           std::make_unique<ConstantArrivals>(1.0));
  EXPECT_EQ(arrivals_of(drain(source)), (std::vector<TimeNs>{0, 250 * k_ns_per_ms}));
}

TEST(TraceWorkload, RateScaleTwoHalvesTheSpan) {
  const TempDir dir;
  scenario::WorkloadConfig c = replay(dir.write("azure.csv", k_azure_fixture));
  const auto once = drain(*make_workload(c, 1));
  c.trace.rate_scale = 2.0;
  const auto twice = drain(*make_workload(c, 1));
  ASSERT_EQ(once.size(), 4u);
  ASSERT_EQ(twice.size(), 4u);
  EXPECT_EQ(arrivals_of(once),
            (std::vector<TimeNs>{0, 500 * k_ns_per_ms, 1250 * k_ns_per_ms, 4 * k_ns_per_s}));
  EXPECT_EQ(arrivals_of(twice),
            (std::vector<TimeNs>{0, 250 * k_ns_per_ms, 625 * k_ns_per_ms, 2 * k_ns_per_s}));
  EXPECT_EQ(twice[2].input_tokens, 879);
  EXPECT_EQ(twice[2].output_tokens, 5);
}

TEST(TraceWorkload, HonoursTheRequestCapAndAnExplicitFormat) {
  const TempDir dir;
  scenario::WorkloadConfig c = replay(dir.write("azure.csv", k_azure_fixture));
  c.trace.max_requests = 3;
  c.trace.format = "azure";
  const auto source = make_workload(c, 1);
  const auto requests = drain(*source);
  ASSERT_EQ(requests.size(), 3u);
  EXPECT_EQ(requests.back().input_tokens, 879);
  EXPECT_EQ(source->notes(),
            std::vector<std::string>{
                "workload.trace.max_requests: replayed the first 3 of the trace's 4 requests"});
}

TEST(TraceWorkload, ReplaysTheWholeTraceUnlessCappedAndSaysNothingThen) {
  const TempDir dir;
  scenario::WorkloadConfig c = replay(dir.write("azure.csv", k_azure_fixture));
  const auto source = make_workload(c, 1);
  EXPECT_EQ(drain(*source).size(), 4u);
  EXPECT_TRUE(source->notes().empty());
}

TEST(TraceWorkload, TimestampedTracesIgnoreTheArrivalSettings) {
  const TempDir dir;
  scenario::WorkloadConfig c = replay(dir.write("azure.csv", k_azure_fixture));
  c.arrivals.process = "poisson";
  c.arrivals.rate = 0.0;  // would be rejected if it were used
  EXPECT_EQ(drain(*make_workload(c, 1)).size(), 4u);
}

TEST(TraceWorkload, LengthOnlyTracesGetArrivalsFromTheArrivalProcess) {
  const TempDir dir;
  scenario::WorkloadConfig c = replay(dir.write("lengths.csv", k_vidur_fixture));
  c.arrivals.process = "poisson";
  c.arrivals.rate = 5.0;
  const auto source = make_workload(c, 3);
  EXPECT_TRUE(source->has_arrivals());
  EXPECT_EQ(source->format_name(), "vidur");
  const auto requests = drain(*source);
  ASSERT_EQ(requests.size(), 3u);
  PoissonArrivals expected(5.0, RandomStream(3, k_arrivals_stream));
  for (const RequestDescriptor& r : requests)
    EXPECT_EQ(*r.arrival, expected.next());
  EXPECT_EQ(requests[0].input_tokens, 3772);
  EXPECT_EQ(requests[2].output_tokens, 10);

  c.trace.rate_scale = 2.0;
  const auto faster = drain(*make_workload(c, 3));
  for (std::size_t i = 0; i < faster.size(); ++i) {
    EXPECT_EQ(*faster[i].arrival, (*requests[i].arrival + 1) / 2);  // half, rounded to nearest
  }
}

TEST(TraceWorkload, GenericCsvReadsTheScenariosColumnMapping) {
  const TempDir dir;
  scenario::WorkloadConfig c =
      replay(dir.write("g.csv", "out,ts,prompt\n44,1000,374\n109,1250.5,396\n"));
  c.trace.format = "csv";
  c.trace.columns = {"ts", "ms", "prompt", "out"};
  c.arrivals.rate = 0.0;  // would be rejected if it were used
  const auto source = make_workload(c, 1);
  EXPECT_EQ(source->format_name(), "csv");
  const auto requests = drain(*source);
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(requests[0], test_support::request(0, 0, 374, 44));
  EXPECT_EQ(requests[1], test_support::request(1, 250'500'000, 396, 109));
}

TEST(TraceWorkload, GenericCsvWithoutArrivalsTakesThemFromTheArrivalProcess) {
  const TempDir dir;
  scenario::WorkloadConfig c = replay(dir.write("g.csv", "prompt,out\n374,44\n396,109\n"));
  c.trace.format = "csv";
  c.trace.columns = {"", "s", "prompt", "out"};
  c.arrivals.process = "poisson";
  c.arrivals.rate = 5.0;
  const auto requests = drain(*make_workload(c, 3));
  ASSERT_EQ(requests.size(), 2u);
  PoissonArrivals expected(5.0, RandomStream(3, k_arrivals_stream));
  for (const RequestDescriptor& r : requests)
    EXPECT_EQ(*r.arrival, expected.next());
  EXPECT_EQ(requests[1].input_tokens, 396);
}

TEST(TraceWorkload, ReplaysThePublishedAzureTrace) {
  const std::string path = shared_trace("azure_llm_2023_conv.csv");
  EXITSIM_SKIP_UNLESS_EXISTS(path);
  scenario::WorkloadConfig c = replay(path);
  const auto whole = make_workload(c, 1);
  EXPECT_EQ(drain(*whole).size(), 19366u);  // a trace replays whole by default
  EXPECT_TRUE(whole->notes().empty());
  c.trace.max_requests = 2000;
  const auto capped = make_workload(c, 1);
  const auto once = drain(*capped);
  EXPECT_EQ(capped->notes(),
            std::vector<std::string>{
                "workload.trace.max_requests: replayed the first 2000 of the trace's 19366 "
                "requests"});
  c.trace.rate_scale = 2.0;
  const auto twice = drain(*make_workload(c, 1));
  ASSERT_EQ(once.size(), 2000u);
  ASSERT_EQ(twice.size(), 2000u);
  EXPECT_EQ(once.front().arrival, 0);
  // Timestamps have 100 ns resolution, so halving is exact.
  EXPECT_EQ(*twice.back().arrival * 2, *once.back().arrival);
  // The README gives ~5.5 requests/s for the whole trace.
  const double rate = 1999.0 / to_seconds(*once.back().arrival);
  EXPECT_GT(rate, 2.0);
  EXPECT_LT(rate, 15.0);
}

TEST(MakeWorkload, RejectsImpossibleConfigurations) {
  const TempDir dir;
  scenario::WorkloadConfig bad_source = synthetic(10);
  bad_source.source = "replay";
  EXPECT_EQ(error_of(bad_source), "workload.source: expected synthetic or trace, found 'replay'");
  EXPECT_EQ(error_of(synthetic(0)), "workload.requests: expected a request count >= 1, found 0");

  scenario::WorkloadConfig bad_rate = synthetic(10);
  bad_rate.arrivals.rate = 0.0;
  EXPECT_EQ(error_of(bad_rate), "workload.arrivals.rate: expected a rate > 0 requests/s, found 0");
  scenario::WorkloadConfig bad_output = synthetic(10);
  bad_output.output_tokens.min = 100;
  EXPECT_EQ(error_of(bad_output),
            "workload.output_tokens.min: expected a value <= max (90), found 100");

  const std::string azure = dir.write("azure.csv", k_azure_fixture);
  EXPECT_EQ(error_of(replay("")),
            "workload.trace.path: expected a request trace file, found an empty path");
  scenario::WorkloadConfig scale = replay(azure);
  scale.trace.rate_scale = 0.0;
  EXPECT_EQ(error_of(scale), "workload.trace.rate_scale: expected a scale > 0, found 0");
  scale.trace.rate_scale = -2.0;
  EXPECT_EQ(error_of(scale), "workload.trace.rate_scale: expected a scale > 0, found -2");
  scenario::WorkloadConfig cap = replay(azure);
  cap.trace.max_requests = -1;
  EXPECT_EQ(error_of(cap),
            "workload.trace.max_requests: expected a request cap >= 0 (0 = whole trace), found -1");
  scenario::WorkloadConfig format = replay(azure);
  format.trace.format = "azur";
  EXPECT_EQ(error_of(format),
            "workload.trace.format: expected one of auto, azure, vidur, mooncake, burstgpt, "
            "native, tracev2, csv, sharegpt, found 'azur' (did you mean 'azure'?)");

  scenario::WorkloadConfig length_only = replay(dir.write("lengths.csv", k_vidur_fixture));
  length_only.arrivals.process = "gamma";
  length_only.arrivals.rate = 1.0;
  length_only.arrivals.cv = -1.0;
  EXPECT_EQ(error_of(length_only),
            "workload.arrivals.cv: expected a coefficient of variation > 0, found -1");
}

}  // namespace
}  // namespace exitsim::sim
