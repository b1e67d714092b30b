// The CUPTI tracer on a real device: kernels launched under an engine op's label come back as
// kernel rows, launch rows and one row per engine op, every kernel attributed.
#include "exitsim/profiler/cupti_tracer.hpp"

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "exitsim/kernels/cuda_check.hpp"
#include "exitsim/kernels/rms_norm.hpp"

namespace exitsim::profiler {
namespace {

TEST(CuptiTracer, LabelledKernelsBecomeEngineOpRows) {
  if (!kernels::cuda_device_available())
    GTEST_SKIP() << "no CUDA device: " << kernels::cuda_unavailable_reason();
  constexpr int rows = 64;
  constexpr int dim = 256;
  float* x = nullptr;
  float* w = nullptr;
  kernels::check_cuda(cudaMalloc(&x, sizeof(float) * rows * dim), "cudaMalloc");
  kernels::check_cuda(cudaMalloc(&w, sizeof(float) * dim), "cudaMalloc");
  kernels::check_cuda(cudaMemset(x, 0, sizeof(float) * rows * dim), "cudaMemset");
  kernels::check_cuda(cudaMemset(w, 0, sizeof(float) * dim), "cudaMemset");
  std::vector<traces::OpTraceRow> trace;
  ActivityJoinStats stats;
  {
    CuptiTracer tracer;
    for (int layer = 0; layer < 3; ++layer) {
      CuptiOpScope scope(&tracer, {"attn_norm",
                                   traces::OpKind::norm,
                                   {.batch_tokens = rows, .depth = layer, .step_id = 1}});
      kernels::rms_norm(x, w, x, rows, dim, 1e-5f);
    }
    kernels::check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    trace = tracer.take_rows();
    stats = tracer.last_join();
    EXPECT_EQ(tracer.dropped_records(), 0u);
  }
  cudaFree(x);
  cudaFree(w);
  EXPECT_EQ(stats.engine_ops, 3) << describe(stats);
  EXPECT_EQ(stats.attributed, 3) << describe(stats);
  EXPECT_TRUE(stats.unattributed.empty()) << describe(stats);
  const auto ops = std::count_if(trace.begin(), trace.end(), [](const traces::OpTraceRow& r) {
    return r.name == "attn_norm" && r.device.starts_with("cuda:") && r.duration_ns > 0;
  });
  EXPECT_EQ(ops, 3);
  const auto launches = std::count_if(trace.begin(), trace.end(), [](const traces::OpTraceRow& r) {
    return r.device == "cpu" && r.correlation_id != 0 && r.step_id == 1;
  });
  EXPECT_GE(launches, 3);
}

}  // namespace
}  // namespace exitsim::profiler
