#include "exitsim/policy/servable.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

#include "exitsim/policy/scheduler_registry.hpp"

namespace exitsim::policy {
namespace {

constexpr ServingCapacity k_whole_prompts{false, 8192, 100'000, 8192};

TEST(UnservableReason, ServesWhatFitsEveryLimitExactly) {
  EXPECT_FALSE(unservable_reason(8192, 0, k_whole_prompts).has_value());
  EXPECT_FALSE(unservable_reason(6000, 2192, k_whole_prompts).has_value());
}

TEST(UnservableReason, NamesTheFirstLimitARequestBreaks) {
  EXPECT_EQ(unservable_reason(8193, 1, k_whole_prompts),
            UnservableReason::prompt_over_batch_budget);
  EXPECT_EQ(unservable_reason(6000, 2193, k_whole_prompts), UnservableReason::over_context_window);
  ServingCapacity small_kv = k_whole_prompts;
  small_kv.kv_tokens = 4096;
  EXPECT_EQ(unservable_reason(4000, 100, small_kv), UnservableReason::over_kv_capacity);
}

TEST(UnservableReason, ChunkingSchedulersAndUnlimitedWindowsLiftThoseLimits) {
  ServingCapacity chunked = k_whole_prompts;
  chunked.chunks_prompts = true;
  chunked.max_context = 0;
  EXPECT_FALSE(unservable_reason(40'000, 500, chunked).has_value());
  chunked.kv_tokens = 40'000;
  EXPECT_EQ(unservable_reason(40'000, 500, chunked), UnservableReason::over_kv_capacity);
}

TEST(UnservableReason, HugeLengthsDoNotOverflow) {
  const std::int64_t huge = std::numeric_limits<std::int64_t>::max();
  ServingCapacity open = k_whole_prompts;
  open.chunks_prompts = true;
  EXPECT_EQ(unservable_reason(10, huge, open), UnservableReason::over_context_window);
  open.max_context = 0;
  EXPECT_EQ(unservable_reason(10, huge, open), UnservableReason::over_kv_capacity);
}

TEST(UnservableReason, OnlyChunkedPrefillChunksAmongTheBuiltIns) {
  for (const char* name : {"static", "continuous", "shortest_prompt_first"})
    EXPECT_FALSE(make_scheduler(name, {})->chunks_prompts()) << name;
  EXPECT_TRUE(make_scheduler("chunked_prefill", {})->chunks_prompts());
}

}  // namespace
}  // namespace exitsim::policy
