#include "exitsim/kernels/lm_head.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "exitsim/engine/cpu_ops.hpp"
#include "kernels/support/device_buffer.hpp"
#include "kernels/support/reference.hpp"

namespace exitsim::kernels {
namespace {

using testing::DeviceBuffer;

TEST(LmHeadLaunch, OneBlockPerRow) {
  const LaunchConfig c = top2_confidence_launch({.rows = 5, .vocab = 32000});
  EXPECT_EQ(c.grid_x, 5u);
  EXPECT_EQ(c.threads, 1024u);
  EXPECT_EQ(top2_confidence_launch({.rows = 1, .vocab = 1}).threads, 32u);
  EXPECT_EQ(top2_confidence_launch({.rows = 1, .vocab = 100}).threads, 128u);
  EXPECT_TRUE(top2_confidence_launch({.rows = 0, .vocab = 10}).empty());
  EXPECT_THROW(top2_confidence_launch({.rows = 1, .vocab = 0}), std::invalid_argument);
  EXPECT_THROW(top2_confidence_launch({.rows = -1, .vocab = 4}), std::invalid_argument);
  EXPECT_THROW(top2_confidence_launch({.rows = 1, .vocab = 4, .stride = 3}), std::invalid_argument);
  EXPECT_NO_THROW(top2_confidence(nullptr, {.rows = 0, .vocab = 4}, nullptr, nullptr, nullptr));

  const LaunchConfig r = router_scores_launch({.rows = 9, .dim = 512});
  EXPECT_EQ(r.grid_x, 9u);
  EXPECT_EQ(r.threads, 256u);
  EXPECT_THROW(router_scores_launch({.rows = 1, .dim = -1}), std::invalid_argument);
  EXPECT_THROW(router_scores_launch({.rows = 1, .dim = 8, .stride = 4}), std::invalid_argument);
  EXPECT_NO_THROW(router_scores<float>(nullptr, nullptr, 0.0f, nullptr, {.rows = 0, .dim = 8}));
}

TEST(Top2ConfidenceKernel, MatchesTheCpuEngine) {
  if (!cuda_device_available()) {
    GTEST_SKIP() << "no CUDA device: " << cuda_unavailable_reason();
  }
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  for (const std::int64_t vocab : {1, 2, 33, 1000, 32000, 50257}) {
    SCOPED_TRACE("vocab " + std::to_string(vocab));
    const std::int64_t rows = 6;
    std::vector<float> logits(static_cast<std::size_t>(rows * vocab));
    for (float& l : logits)
      l = normal(rng);
    auto row = [&](std::int64_t r) {
      return std::span<float>(logits).subspan(static_cast<std::size_t>(r * vocab),
                                              static_cast<std::size_t>(vocab));
    };
    if (vocab > 2) {
      const auto v = static_cast<std::size_t>(vocab);
      row(1)[2] = row(1)[v - 1] = 40.0f;  // a tie: the lower index wins, margin 0
      row(2)[v / 2] = 60.0f;              // a confident row, top1_prob near 1
      for (float& l : row(3))             // -inf entries contribute nothing
        l = l < 0 ? -std::numeric_limits<float>::infinity() : l;
    }
    DeviceBuffer<float> dlogits(logits);
    DeviceBuffer<std::int32_t> dindex(static_cast<std::size_t>(rows));
    DeviceBuffer<float> dprob(static_cast<std::size_t>(rows));
    DeviceBuffer<float> dmargin(static_cast<std::size_t>(rows));
    top2_confidence(dlogits.get(), {.rows = rows, .vocab = vocab}, dindex.get(), dprob.get(),
                    dmargin.get());
    testing::synchronize();
    const auto index = dindex.download();
    const auto prob = dprob.download();
    const auto margin = dmargin.download();
    for (std::int64_t r = 0; r < rows; ++r) {
      const engine::Top2Confidence e = engine::top2_confidence(row(r));
      const auto i = static_cast<std::size_t>(r);
      EXPECT_EQ(index[i], e.top1_index) << "row " << r;
      // The sum of exps runs in fp32 over up to 50k terms: 1e-5 relative on the probability,
      // and the margin, a difference of two such, to 1e-5 of top1_prob.
      EXPECT_NEAR(prob[i], e.top1_prob, 1e-5f * e.top1_prob) << "row " << r;
      EXPECT_NEAR(margin[i], e.margin, 1e-5f * e.top1_prob) << "row " << r;
    }
  }
}

TEST(Top2ConfidenceKernel, AllMinusInfinityIsFlagged) {
  if (!cuda_device_available()) {
    GTEST_SKIP() << "no CUDA device: " << cuda_unavailable_reason();
  }
  const std::vector<float> logits(40, -std::numeric_limits<float>::infinity());
  DeviceBuffer<float> dlogits(logits);
  DeviceBuffer<std::int32_t> dindex(1);
  DeviceBuffer<float> dprob(1);
  DeviceBuffer<float> dmargin(1);
  top2_confidence(dlogits.get(), {.rows = 1, .vocab = 40}, dindex.get(), dprob.get(),
                  dmargin.get());
  testing::synchronize();
  EXPECT_EQ(dindex.download()[0], -1);
  EXPECT_TRUE(std::isnan(dprob.download()[0]));
}

template <typename T>
class RouterKernel : public ::testing::Test {};
using StorageTypes = ::testing::Types<float, __half, __nv_bfloat16>;
TYPED_TEST_SUITE(RouterKernel, StorageTypes);

TYPED_TEST(RouterKernel, MatchesTheCpuEngine) {
  using T = TypeParam;
  if (!cuda_device_available()) {
    GTEST_SKIP() << "no CUDA device: " << cuda_unavailable_reason();
  }
  std::mt19937 rng(17);
  for (const std::int64_t dim : {1, 31, 256, 2048}) {
    SCOPED_TRACE("dim " + std::to_string(dim));
    const std::int64_t rows = 11;
    // Weights scaled by 1 / sqrt(dim) keep the logit O(1), where the sigmoid is not saturated.
    const auto x = testing::random_values<T>(static_cast<std::size_t>(rows * dim), rng);
    const auto w = testing::random_values<T>(static_cast<std::size_t>(dim), rng,
                                             1.0f / std::sqrt(static_cast<float>(dim)));
    const float bias = 0.25f;
    const std::vector<double> expected = testing::router_reference(x, w, bias, rows, dim);
    DeviceBuffer<T> dx(testing::to_storage<T>(x));
    DeviceBuffer<T> dw(testing::to_storage<T>(w));
    DeviceBuffer<float> dscores(static_cast<std::size_t>(rows));
    router_scores(dx.get(), dw.get(), bias, dscores.get(), {.rows = rows, .dim = dim});
    testing::synchronize();
    const auto scores = dscores.download();
    // Products of fp16/bf16 values are exact in fp32, so every type differs from the double
    // reference only by fp32 summation: 2e-5 absolute on a score in (0, 1).
    for (std::size_t r = 0; r < scores.size(); ++r)
      EXPECT_NEAR(scores[r], expected[r], 2e-5) << "row " << r;
  }
}

}  // namespace
}  // namespace exitsim::kernels
