#include "exitsim/analysis/step_graph.hpp"

#include <gtest/gtest.h>

#include "support/test_files.hpp"

namespace exitsim::analysis {
namespace {

using test_support::TempDir;

TEST(StepGraph, CriticalPathFollowsStreamsAndNamesTheSimulatorsOps) {
  TempDir dir;
  const std::string path = dir.path("ops.csv");
  {
    traces::OpTraceWriter w(path);
    const auto op = [&](const char* name, int stream, TimeNs start, TimeNs duration,
                        std::uint64_t step) {
      traces::OpTraceRow r;
      r.name = name;
      r.stream = stream;
      r.start_ns = start;
      r.duration_ns = duration;
      r.step_id = step;
      w.write(r);
    };
    // Step 1, two streams: 10 + 20 on stream 0, 40 on stream 1; the step spans 0..45.
    op("qkv_proj", 0, 0, 10, 1);
    op("attention", 0, 10, 20, 1);
    op("mlp.down", 1, 5, 40, 1);
    // Step 2, one stream with a 5 ns gap between its ops.
    op("rotary", 0, 100, 3, 2);
    op("lm_head", 0, 108, 7, 2);
    w.finish();
  }
  const std::vector<StepGraph> steps = step_graphs(path);
  ASSERT_EQ(steps.size(), 2U);
  EXPECT_EQ(steps[0].wall, 45);
  EXPECT_DOUBLE_EQ(steps[0].critical_path_ns, 40);
  EXPECT_DOUBLE_EQ(steps[0].critical_by_kind_ns.at("mlp_down"), 40);
  EXPECT_EQ(steps[1].wall, 15);
  EXPECT_DOUBLE_EQ(steps[1].critical_path_ns, 10);  // the gap lies on no op
  EXPECT_DOUBLE_EQ(steps[1].critical_by_kind_ns.at("host_op"), 3);
  EXPECT_EQ(simulator_op_of("mlp.gate_up"), sim::OpKind::mlp_gate_up);
  EXPECT_EQ(simulator_op_of("compaction"), sim::OpKind::host_op);
}

}  // namespace
}  // namespace exitsim::analysis
