#include "exitsim/profiler/host_profiler.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "exitsim/profiler/kernel_kind.hpp"
#include "exitsim/traces/op_trace.hpp"

namespace exitsim::profiler {
namespace {

namespace fs = std::filesystem;
using traces::OpKind;
using traces::OpTraceRow;

TEST(HostProfiler, SpansNestAndCarryTheirShape) {
  HostProfiler profiler;
  {
    auto step = profiler.span("decode.step", OpKind::other, {.step_id = 4});
    {
      auto up = profiler.span(
          "mlp.up", OpKind::gemm,
          {.batch_tokens = 8, .context_tokens = 512, .depth = 3, .recursion = 1, .step_id = 4});
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    auto norm = profiler.span("norm", OpKind::norm);
  }
  const std::vector<OpTraceRow> rows = profiler.rows();
  ASSERT_EQ(rows.size(), 3u);
  const OpTraceRow& step = rows[0];
  const OpTraceRow& up = rows[1];
  const OpTraceRow& norm = rows[2];
  EXPECT_EQ(step.name, "decode.step");
  EXPECT_EQ(up.name, "mlp.up");
  EXPECT_EQ(up.kind, OpKind::gemm);
  EXPECT_EQ(up.batch_tokens, 8);
  EXPECT_EQ(up.context_tokens, 512);
  EXPECT_EQ(up.depth, 3);
  EXPECT_EQ(up.recursion, 1);
  EXPECT_EQ(up.step_id, 4u);
  EXPECT_EQ(up.device, "cpu");
  EXPECT_EQ(up.stream, 0);
  EXPECT_EQ(norm.depth, -1) << "default: outside the layer stack";
  for (const OpTraceRow& row : rows) {
    EXPECT_GE(row.start_ns, 0);
    EXPECT_GE(row.duration_ns, 0);
  }
  EXPECT_GE(up.duration_ns, 50'000);
  // The inner span lies within the outer one, and the sibling starts after the first ends.
  EXPECT_LE(step.start_ns, up.start_ns);
  EXPECT_LE(up.start_ns + up.duration_ns, step.start_ns + step.duration_ns);
  EXPECT_GE(norm.start_ns, up.start_ns + up.duration_ns);
  EXPECT_LE(norm.start_ns + norm.duration_ns, step.start_ns + step.duration_ns);
  EXPECT_EQ(step.correlation_id, 1u);
  EXPECT_EQ(up.correlation_id, 2u);
  EXPECT_EQ(norm.correlation_id, 3u);
}

TEST(HostProfiler, EndIsIdempotentAndSpansMove) {
  HostProfiler profiler({.capacity = 1, .device = "cpu", .stream = 2, .first_correlation_id = 100});
  HostProfiler::Span a = profiler.span("a", OpKind::elementwise);
  EXPECT_EQ(a.correlation_id(), 100u);
  HostProfiler::Span moved = std::move(a);
  EXPECT_EQ(moved.correlation_id(), 100u);
  moved.end();
  moved.end();
  {
    auto b = profiler.span("b", OpKind::sampling);  // beyond capacity: storage grows
    auto c = profiler.span("a", OpKind::elementwise);
  }
  const std::vector<OpTraceRow> rows = profiler.rows();
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[2].name, "a");
  EXPECT_EQ(rows[2].stream, 2);
  EXPECT_EQ(rows[2].correlation_id, 102u);
  profiler.clear();
  EXPECT_EQ(profiler.size(), 0u);
  { auto d = profiler.span("d", OpKind::other); }
  EXPECT_EQ(profiler.rows().at(0).correlation_id, 103u) << "ids keep increasing after clear()";
}

TEST(HostProfiler, ManyDistinctNamesStayIntact) {
  // Short names live inside std::string objects; interning must survive the storage growing.
  HostProfiler profiler;
  for (int i = 0; i < 200; ++i) {
    auto s = profiler.span("op" + std::to_string(i), OpKind::other);
  }
  const std::vector<OpTraceRow> rows = profiler.rows();
  ASSERT_EQ(rows.size(), 200u);
  for (int i = 0; i < 200; ++i)
    EXPECT_EQ(rows[static_cast<std::size_t>(i)].name, "op" + std::to_string(i));
  auto again = profiler.span("op7", OpKind::other);
  again.end();
  EXPECT_EQ(profiler.rows().back().name, "op7");
}

TEST(HostProfiler, DisabledRecordsNothing) {
  HostProfiler profiler({.enabled = false});
  EXPECT_FALSE(profiler.enabled());
  {
    auto span = profiler.span("mlp.up", OpKind::gemm);
    EXPECT_EQ(span.correlation_id(), 0u);
  }
  EXPECT_EQ(profiler.size(), 0u);
  EXPECT_TRUE(profiler.rows().empty());
}

TEST(HostProfiler, RowsWrittenReadBack) {
  const fs::path path = fs::path(testing::TempDir()) / "exitsim_host_profiler.csv";
  fs::remove(path);
  HostProfiler profiler;
  {
    auto outer = profiler.span("attn.decode", OpKind::attention,
                               {.batch_tokens = 4, .context_tokens = 100, .depth = 0});
    auto inner = profiler.span("attn, \"softmax\"", OpKind::norm);
  }
  {
    traces::OpTraceWriter writer(path.string());
    profiler.write(writer);
    writer.finish();
  }
  traces::OpTraceReader reader(path.string());
  for (const OpTraceRow& expected : profiler.rows()) {
    const std::optional<OpTraceRow> row = reader.next();
    ASSERT_TRUE(row.has_value());
    EXPECT_EQ(*row, expected);
  }
  EXPECT_FALSE(reader.next().has_value());
}

TEST(KernelKind, ClassifiesCommonKernelNames) {
  EXPECT_EQ(classify_kernel("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64"),
            OpKind::gemm);
  EXPECT_EQ(classify_kernel("void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm>(Params)"),
            OpKind::gemm);
  EXPECT_EQ(classify_kernel("void flash_fwd_kernel<Flash_fwd_kernel_traits<128>>(Params)"),
            OpKind::attention);
  EXPECT_EQ(classify_kernel("exitsim::kernels::(anonymous namespace)::rms_norm_kernel(...)"),
            OpKind::norm);
  EXPECT_EQ(classify_kernel("void at::native::vectorized_elementwise_kernel<4>(int)"),
            OpKind::elementwise);
  EXPECT_EQ(classify_kernel("topk_sampling_kernel"), OpKind::sampling);
  EXPECT_EQ(classify_kernel("my_custom_thing"), OpKind::other);
}

}  // namespace
}  // namespace exitsim::profiler
