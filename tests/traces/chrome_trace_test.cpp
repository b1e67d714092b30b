#include "exitsim/traces/chrome_trace.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "exitsim/traces/atomic_output.hpp"
#include "exitsim/traces/op_trace.hpp"
#include "support/test_files.hpp"

namespace exitsim::traces {
namespace {

namespace fs = std::filesystem;

// A fresh directory per test: a file left by an earlier run would hide a writer that renames too
// early.
using test_support::read_file;
using test_support::TempDir;

std::vector<nlohmann::json> events_with_ph(const nlohmann::json& trace, const std::string& ph) {
  std::vector<nlohmann::json> out;
  for (const nlohmann::json& event : trace.at("traceEvents")) {
    if (event.at("ph") == ph)
      out.push_back(event);
  }
  return out;
}

TEST(ChromeTrace, FormatsMicrosecondsFromIntegerNanoseconds) {
  EXPECT_EQ(format_chrome_us(1'234'567), "1234.567");
  EXPECT_EQ(format_chrome_us(0), "0.000");
  EXPECT_EQ(format_chrome_us(5), "0.005");
  EXPECT_EQ(format_chrome_us(-5), "-0.005");
  EXPECT_EQ(format_chrome_us(-1'234'567), "-1234.567");
  // Beyond 2^53 a double could not hold these digits; the integer path keeps every one.
  EXPECT_EQ(format_chrome_us(9'007'199'254'740'993), "9007199254740.993");
  EXPECT_EQ(format_chrome_us(INT64_MAX), "9223372036854775.807");
  EXPECT_EQ(format_chrome_us(INT64_MIN), "-9223372036854775.808");
}

TEST(ChromeTrace, WritesLoadableEventsWithMetadataFlowsAndCounters) {
  TempDir dir;
  const std::string path = dir.path("events.json");
  {
    ChromeTraceWriter writer(path);
    const ChromeTrack host = writer.track("cpu", "thread 0");
    const ChromeTrack gpu = writer.track("cuda:0", "stream 7");
    EXPECT_EQ(writer.track("cpu", "thread 0").tid, host.tid) << "a track is created once";
    EXPECT_NE(host.pid, gpu.pid);
    EXPECT_NE(host.tid, gpu.tid);
    writer.complete(host, "launch \"gemm\"", 1'234'567, 1'001,
                    {{"step_id", std::uint64_t{3}}, {"note", std::string("a\nb")}});
    writer.complete(gpu, "gemm", 1'240'000, 20'000, {}, "gemm");
    writer.flow_start(host, "launch", 1'234'567, 42);
    writer.flow_end(gpu, "launch", 1'240'000, 42);
    writer.counter(host, "kv_blocks", 1'000, {{"used", std::int64_t{12}}, {"free", 3.5}});
    writer.finish();
    EXPECT_FALSE(writer.truncated());
  }
  const std::string text = read_file(path);
  EXPECT_NE(text.find("\"ts\":1234.567,\"dur\":1.001"), std::string::npos) << text;
  const nlohmann::json trace = nlohmann::json::parse(text);
  EXPECT_EQ(trace.at("displayTimeUnit"), "ns");
  EXPECT_EQ(trace.at("otherData").at("truncated"), false);

  const auto metadata = events_with_ph(trace, "M");
  ASSERT_EQ(metadata.size(), 4u);
  EXPECT_EQ(metadata[0].at("name"), "process_name");
  EXPECT_EQ(metadata[0].at("args").at("name"), "cpu");
  EXPECT_EQ(metadata[1].at("name"), "thread_name");
  EXPECT_EQ(metadata[1].at("args").at("name"), "thread 0");
  EXPECT_EQ(metadata[3].at("args").at("name"), "stream 7");

  const auto complete = events_with_ph(trace, "X");
  ASSERT_EQ(complete.size(), 2u);
  EXPECT_EQ(complete[0].at("name"), "launch \"gemm\"");
  EXPECT_EQ(complete[0].at("args").at("note"), "a\nb");
  EXPECT_EQ(complete[0].at("args").at("step_id"), 3);
  EXPECT_EQ(complete[1].at("cat"), "gemm");
  EXPECT_DOUBLE_EQ(complete[1].at("dur").get<double>(), 20.0);

  const auto starts = events_with_ph(trace, "s");
  const auto ends = events_with_ph(trace, "f");
  ASSERT_EQ(starts.size(), 1u);
  ASSERT_EQ(ends.size(), 1u);
  EXPECT_EQ(starts[0].at("id"), 42);
  EXPECT_EQ(ends[0].at("id"), 42);
  EXPECT_EQ(ends[0].at("bp"), "e");
  EXPECT_EQ(starts[0].at("tid"), complete[0].at("tid"));
  EXPECT_EQ(ends[0].at("tid"), complete[1].at("tid"));

  const auto counters = events_with_ph(trace, "C");
  ASSERT_EQ(counters.size(), 1u);
  EXPECT_EQ(counters[0].at("args").at("used"), 12);
  EXPECT_EQ(counters[0].at("args").at("free"), 3.5);
}

TEST(ChromeTrace, StopsAtTheSizeCapAndSaysSo) {
  TempDir dir;
  const std::string path = dir.path("capped.json");
  constexpr std::int64_t k_cap = 2'000;
  std::int64_t written = 0;
  {
    ChromeTraceWriter writer(path, {.max_bytes = k_cap});
    const ChromeTrack track = writer.track("cpu", "thread 0");
    for (int i = 0; i < 100; ++i)
      writer.complete(track, "op", i * 1'000, 500);
    EXPECT_TRUE(writer.truncated());
    written = writer.events_written();
    EXPECT_EQ(written + writer.dropped_events(), 102);
    writer.finish();
  }
  EXPECT_LE(static_cast<std::int64_t>(fs::file_size(path)), k_cap);
  const nlohmann::json trace = nlohmann::json::parse(read_file(path));
  EXPECT_EQ(static_cast<std::int64_t>(trace.at("traceEvents").size()), written);
  EXPECT_EQ(trace.at("otherData").at("truncated"), true);
  EXPECT_EQ(trace.at("otherData").at("dropped_events"), 102 - written);
  EXPECT_EQ(trace.at("otherData").at("max_bytes"), k_cap);
}

TEST(ChromeTrace, UnfinishedWriterLeavesNoFile) {
  TempDir dir;
  const std::string path = dir.path("unfinished.json");
  {
    ChromeTraceWriter writer(path);
    writer.complete(writer.track("cpu", "t"), "op", 0, 1);
  }
  EXPECT_FALSE(fs::exists(path));
  EXPECT_FALSE(fs::exists(detail::AtomicOutputFile::temp_path_for(path)));
}

TEST(ChromeTrace, ConvertsAnOpTraceWithFlowsByCorrelationId) {
  TempDir dir;
  const std::string ops = dir.path("ops.csv");
  {
    OpTraceWriter writer(ops);
    writer.write({.name = "cudaLaunchKernel",
                  .kind = OpKind::other,
                  .device = "cpu",
                  .start_ns = 1'000,
                  .duration_ns = 300,
                  .correlation_id = 5});
    writer.write({.name = "mlp.up",
                  .kind = OpKind::gemm,
                  .device = "cpu",
                  .start_ns = 900,
                  .duration_ns = 600,
                  .correlation_id = 6});
    writer.write({.name = "gemm_kernel",
                  .kind = OpKind::gemm,
                  .device = "cuda:0",
                  .stream = 7,
                  .start_ns = 2'000,
                  .duration_ns = 4'000,
                  .batch_tokens = 16,
                  .depth = 2,
                  .correlation_id = 5});
    writer.write({.name = "rms_norm",
                  .kind = OpKind::norm,
                  .device = "cuda:0",
                  .stream = 8,
                  .start_ns = 7'000,
                  .duration_ns = 100,
                  .correlation_id = 0});
    writer.finish();
  }
  const std::string path = dir.path("ops.json");
  {
    OpTraceReader reader(ops);
    ChromeTraceWriter writer(path);
    EXPECT_EQ(write_op_trace_as_chrome(reader, writer), 4);
    writer.finish();
  }
  const nlohmann::json trace = nlohmann::json::parse(read_file(path));
  const auto complete = events_with_ph(trace, "X");
  ASSERT_EQ(complete.size(), 4u);
  EXPECT_EQ(complete[2].at("name"), "gemm_kernel");
  EXPECT_EQ(complete[2].at("cat"), "gemm");
  EXPECT_EQ(complete[2].at("args").at("batch_tokens"), 16);
  EXPECT_EQ(complete[2].at("args").at("depth"), 2);
  EXPECT_EQ(complete[0].at("tid"), complete[1].at("tid")) << "one track per device and stream";
  EXPECT_NE(complete[2].at("tid"), complete[3].at("tid"));
  EXPECT_NE(complete[0].at("pid"), complete[2].at("pid"));

  const auto metadata = events_with_ph(trace, "M");
  std::vector<std::string> names;
  for (const auto& m : metadata)
    names.push_back(m.at("args").at("name").get<std::string>());
  EXPECT_EQ(names, (std::vector<std::string>{"cpu", "thread 0", "cuda:0", "stream 7", "stream 8"}));

  const auto starts = events_with_ph(trace, "s");
  const auto ends = events_with_ph(trace, "f");
  ASSERT_EQ(starts.size(), 1u) << "only id 5 has both a host and a device event";
  ASSERT_EQ(ends.size(), 1u);
  EXPECT_EQ(starts[0].at("id"), 5);
  EXPECT_EQ(starts[0].at("tid"), complete[0].at("tid"));
  EXPECT_EQ(ends[0].at("tid"), complete[2].at("tid"));
  EXPECT_DOUBLE_EQ(ends[0].at("ts").get<double>(), 2.0);
}

}  // namespace
}  // namespace exitsim::traces
