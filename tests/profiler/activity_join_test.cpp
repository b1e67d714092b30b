// The GPU trace's join, fed with synthetic activity records as CUPTI would deliver them: out of
// order, with launches, their kernels, external correlation records naming the engine ops, a
// memcpy, and a synchronization wait.
#include "exitsim/profiler/activity_join.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "exitsim/traces/chrome_trace.hpp"

namespace exitsim::profiler {
namespace {

ActivityRecord record(ActivityKind kind, std::string name, TimeNs start, TimeNs end,
                      std::uint32_t correlation) {
  ActivityRecord r;
  r.kind = kind;
  r.name = std::move(name);
  r.start_ns = start;
  r.end_ns = end;
  r.correlation = correlation;
  return r;
}

ActivityRecord external(std::uint32_t correlation, std::uint64_t id) {
  ActivityRecord r;
  r.kind = ActivityKind::external_correlation;
  r.correlation = correlation;
  r.external_id = id;
  return r;
}

// One decode step: the qkv projection (a cuBLAS GEMM, correlation 1) and attention (two kernels,
// correlations 2 and 3) of layer 0, labelled 100 and 101; an unlabelled memcpy (4); and the host
// waiting for the step's result (5).
std::vector<ActivityRecord> one_step() {
  std::vector<ActivityRecord> r;
  auto launch = [&](std::uint32_t c, TimeNs at, std::uint32_t thread) {
    ActivityRecord call = record(ActivityKind::runtime, "cudaLaunchKernel", at, at + 3'000, c);
    call.thread = thread;
    r.push_back(call);
  };
  launch(1, 1'000, 77);
  launch(2, 5'000, 77);
  launch(3, 9'000, 77);
  ActivityRecord gemm = record(ActivityKind::kernel, "sm90_xmma_gemm_f32", 4'000, 20'000, 1);
  gemm.stream = 7;
  ActivityRecord attention = record(ActivityKind::kernel, "paged_attention", 20'000, 30'000, 2);
  attention.stream = 7;
  ActivityRecord reduce = record(ActivityKind::kernel, "attention_reduce", 30'000, 33'000, 3);
  reduce.stream = 7;
  r.insert(r.end(), {gemm, attention, reduce});
  ActivityRecord copy = record(ActivityKind::memcpy, "memcpy DtoH", 34'000, 36'000, 4);
  copy.stream = 7;
  copy.bytes = 1024;
  r.push_back(copy);
  ActivityRecord copy_call = record(ActivityKind::runtime, "cudaMemcpyAsync", 12'000, 13'000, 4);
  copy_call.thread = 77;
  r.push_back(copy_call);
  ActivityRecord sync_call =
      record(ActivityKind::runtime, "cudaStreamSynchronize", 14'000, 36'500, 5);
  sync_call.thread = 77;
  r.push_back(sync_call);
  r.push_back(record(ActivityKind::synchronization, "stream synchronize", 14'100, 36'400, 5));
  r.push_back(external(1, 100));
  r.push_back(external(2, 101));
  r.push_back(external(3, 101));
  r.push_back(external(5, 102));
  return r;
}

ActivityJoin joined(std::vector<ActivityRecord> records) {
  ActivityJoin join;
  for (const ActivityRecord& r : records)
    join.add(r);
  join.label(100,
             {"qkv_proj", traces::OpKind::gemm, {.batch_tokens = 8, .depth = 0, .step_id = 3}});
  join.label(101, {"attention",
                   traces::OpKind::attention,
                   {.batch_tokens = 8, .context_tokens = 400, .depth = 0, .step_id = 3}});
  join.label(102, {"host_sync", traces::OpKind::other, {.step_id = 3}});
  return join;
}

const traces::OpTraceRow& find(const std::vector<traces::OpTraceRow>& rows, const std::string& name,
                               const std::string& device) {
  const auto it = std::find_if(rows.begin(), rows.end(), [&](const traces::OpTraceRow& r) {
    return r.name == name && r.device == device;
  });
  if (it == rows.end())
    throw std::runtime_error("no row " + name + " on " + device);
  return *it;
}

TEST(ActivityJoin, EngineOpsSpanTheirKernelsAndCarryTheirFeatures) {
  ActivityJoinStats stats;
  const std::vector<traces::OpTraceRow> rows = joined(one_step()).rows(&stats);
  const traces::OpTraceRow& attention = find(rows, "attention", "cuda:0");
  EXPECT_EQ(attention.start_ns, 20'000);
  EXPECT_EQ(attention.duration_ns, 13'000);  // first kernel's start to the second's end
  EXPECT_EQ(attention.kind, traces::OpKind::attention);
  EXPECT_EQ(attention.stream, 7);
  EXPECT_EQ(attention.context_tokens, 400);
  EXPECT_EQ(attention.step_id, 3u);
  EXPECT_EQ(attention.correlation_id, 0u);  // a summary, not a launch's work
  const traces::OpTraceRow& qkv = find(rows, "qkv_proj", "cuda:0");
  EXPECT_EQ(qkv.duration_ns, 16'000);
  EXPECT_EQ(qkv.batch_tokens, 8);

  // Every kernel keeps its own row, its launch's correlation id and its op's features.
  const traces::OpTraceRow& reduce = find(rows, "attention_reduce", "cuda:0");
  EXPECT_EQ(reduce.correlation_id, 3u);
  EXPECT_EQ(reduce.depth, 0);
  EXPECT_EQ(reduce.step_id, 3u);
  const traces::OpTraceRow& launch = find(rows, "cudaLaunchKernel", "cpu");
  EXPECT_EQ(launch.correlation_id, 1u);
  EXPECT_EQ(launch.step_id, 3u);

  EXPECT_EQ(stats.device_records, 4);
  EXPECT_EQ(stats.attributed, 3);
  EXPECT_EQ(stats.engine_ops, 2);  // host_sync launched no device work
  EXPECT_EQ(stats.runtime_records, 5);
  EXPECT_EQ(stats.waits, 1);
  ASSERT_EQ(stats.unattributed.size(), 1u);
  EXPECT_EQ(stats.unattributed.at("memcpy DtoH"), 1);
  EXPECT_EQ(describe(stats),
            "3 of 4 device records attributed to 2 engine ops; 1 waits; unattributed: memcpy "
            "DtoH x1");
}

TEST(ActivityJoin, WaitsSitOnTheWaitingThreadWithTheirLabel) {
  const std::vector<traces::OpTraceRow> rows = joined(one_step()).rows();
  const traces::OpTraceRow& wait = find(rows, "stream synchronize", "cpu");
  EXPECT_EQ(wait.stream, 0);  // thread 77, the first (and only) host thread
  EXPECT_EQ(wait.duration_ns, 22'300);
  EXPECT_EQ(wait.step_id, 3u);
  EXPECT_EQ(wait.correlation_id, 0u);
  const traces::OpTraceRow& copy = find(rows, "memcpy DtoH", "cuda:0");
  EXPECT_EQ(copy.kind, traces::OpKind::memcpy);
  EXPECT_EQ(copy.step_id, 0u);  // unlabelled: no features
}

TEST(ActivityJoin, DeliveryOrderDoesNotChangeTheRows) {
  const std::vector<traces::OpTraceRow> expected = joined(one_step()).rows();
  std::vector<ActivityRecord> shuffled = one_step();
  std::mt19937 random(5);
  for (int trial = 0; trial < 10; ++trial) {
    std::shuffle(shuffled.begin(), shuffled.end(), random);
    EXPECT_EQ(joined(shuffled).rows(), expected) << "trial " << trial;
  }
  for (std::size_t i = 1; i < expected.size(); ++i)
    EXPECT_LE(expected[i - 1].start_ns, expected[i].start_ns);
}

TEST(ActivityJoin, HostThreadsAreNumberedByTheirFirstCall) {
  ActivityJoin join;
  ActivityRecord late = record(ActivityKind::runtime, "cudaLaunchKernel", 500, 600, 1);
  late.thread = 9;
  ActivityRecord early = record(ActivityKind::runtime, "cudaLaunchKernel", 100, 200, 2);
  early.thread = 4;
  join.add(late);
  join.add(early);
  const std::vector<traces::OpTraceRow> rows = join.rows();
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].correlation_id, 2u);
  EXPECT_EQ(rows[0].stream, 0);
  EXPECT_EQ(rows[1].stream, 1);
}

TEST(ActivityJoin, AnExternalIdWithoutALabelLeavesTheWorkUnattributed) {
  ActivityJoin join;
  join.add(record(ActivityKind::kernel, "stray", 0, 10, 1));
  join.add(external(1, 55));
  ActivityJoinStats stats;
  const std::vector<traces::OpTraceRow> rows = join.rows(&stats);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(stats.attributed, 0);
  EXPECT_EQ(stats.unattributed.at("stray"), 1);
}

// The joined rows are an ordinary op trace: written and drawn as Chrome JSON, each stream is a
// track and every launch has its arrow to the work it launched.
TEST(ActivityJoin, ChromeTraceDrawsAnArrowFromEachLaunchToItsWork) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("exitsim_activity_join_" +
                    std::to_string(::testing::UnitTest::GetInstance()->random_seed()));
  std::filesystem::create_directories(dir);
  const std::string csv = (dir / "op_trace.csv").string();
  const std::string json = (dir / "op_trace.json").string();
  {
    traces::OpTraceWriter writer(csv);
    for (const traces::OpTraceRow& row : joined(one_step()).rows())
      writer.write(row);
    writer.finish();
  }
  {
    traces::OpTraceReader reader(csv);
    traces::ChromeTraceWriter chrome(json);
    traces::write_op_trace_as_chrome(reader, chrome);
    chrome.finish();
  }
  std::ifstream in(json);
  const nlohmann::json trace = nlohmann::json::parse(in);
  std::filesystem::remove_all(dir);
  int arrows = 0;
  std::set<std::uint64_t> ids;
  for (const auto& event : trace["traceEvents"]) {
    if (event["ph"] == "s") {
      ++arrows;
      ids.insert(event["id"].get<std::uint64_t>());
    }
  }
  EXPECT_EQ(arrows, 4);  // three kernels and the memcpy; the wait launches nothing
  EXPECT_EQ(ids, (std::set<std::uint64_t>{1, 2, 3, 4}));
}

}  // namespace
}  // namespace exitsim::profiler
