#include <gtest/gtest.h>

#include <array>

#include "exitsim/core/dtype.hpp"
#include "exitsim/core/error.hpp"
#include "exitsim/core/presets.hpp"
#include "exitsim/core/suggest.hpp"
#include "exitsim/core/time.hpp"

namespace exitsim {
namespace {

TEST(Time, ConversionsRoundToNearestNanosecond) {
  EXPECT_EQ(from_seconds(1.5), 1'500'000'000);
  EXPECT_EQ(from_milliseconds(0.0000004), 0);
  EXPECT_EQ(from_milliseconds(0.0000006), 1);
  EXPECT_EQ(from_microseconds(-2.5), -2'500);
  EXPECT_DOUBLE_EQ(to_milliseconds(2'500'000), 2.5);
}

TEST(InputError, RendersOneLineWithLocationFieldAndMessage) {
  const InputError full({"trace.csv", 12, 5, "ContextTokens"},
                        expected_found("a positive integer", "\"-3\""));
  EXPECT_STREQ(full.what(),
               "trace.csv:12:5: ContextTokens: expected a positive integer, found \"-3\"");
  const InputError no_column({"s.yaml", 3, 0, ""}, "bad");
  EXPECT_STREQ(no_column.what(), "s.yaml:3: bad");
  const InputError multi_line({"", 0, 0, "cuda"}, "first\nsecond");
  EXPECT_STREQ(multi_line.what(), "cuda: first second");
}

TEST(Suggest, FindsCloseTyposAndRejectsUnrelatedWords) {
  const std::array<std::string, 3> keys = {"max_running", "max_batched_tokens", "block_size"};
  EXPECT_EQ(nearest_match("max_runing", keys), "max_running");
  EXPECT_EQ(nearest_match("blocksize", keys), "block_size");
  EXPECT_EQ(nearest_match("zebra", keys), "");
  EXPECT_EQ(nearest_match("max_bat", keys), "max_batched_tokens");  // unit or suffix left off
  EXPECT_EQ(nearest_match("ma", keys), "");
  EXPECT_EQ(one_of(keys), "one of max_running, max_batched_tokens, block_size");
}

TEST(DType, NamesRoundTrip) {
  for (DType t : k_all_dtypes)
    EXPECT_EQ(parse_dtype(to_string(t)), t);
  EXPECT_FALSE(parse_dtype("fp64").has_value());
  EXPECT_EQ(bytes_per_element(DType::bf16), 2);
}

TEST(HardwarePresets, CarrySpecSheetFigures) {
  const auto h100 = find_hardware_preset("h100-sxm");
  ASSERT_TRUE(h100.has_value());
  EXPECT_DOUBLE_EQ(h100->peak_flops_for(DType::bf16), 989.4e12);
  EXPECT_DOUBLE_EQ(h100->memory_bandwidth, 3.35e12);
  // FP32 is the non-tensor peak (66.9), not the TF32 tensor-core figure (494.7) it once was.
  EXPECT_DOUBLE_EQ(h100->peak_flops_for(DType::fp32), 66.9e12);
  const auto a100 = find_hardware_preset("a100-40gb");
  ASSERT_TRUE(a100.has_value());
  EXPECT_EQ(a100->peak_flops_for(DType::fp8), 0.0);  // Ampere has no FP8 tensor cores
  EXPECT_DOUBLE_EQ(a100->peak_flops_for(DType::fp32), 19.5e12);
  for (const std::string& name : hardware_preset_names()) {
    const auto spec = find_hardware_preset(name);
    ASSERT_TRUE(spec.has_value());
    EXPECT_GT(spec->memory_bytes, 0) << name;
    EXPECT_GT(spec->memory_bandwidth, 0) << name;
    EXPECT_GT(spec->peak_flops_for(DType::bf16), spec->peak_flops_for(DType::fp32)) << name;
  }
}

}  // namespace
}  // namespace exitsim
