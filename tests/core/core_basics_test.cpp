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

// D10, D17: every message echoes user bytes through here, so here they are made safe: control
// bytes (a terminal escape, a NUL that ended the printed C string) written out, and a 10 MB value
// cut in the middle, keeping the place at the start and the end, never inside a UTF-8 character.
TEST(InputError, EscapesControlBytesAndCutsHugeMessages) {
  const InputError escape({"t.csv", 2, 3, ""}, std::string("found \"\x1b[31mRED\x1b[0m 39\0"
                                                           "6\x7f\"",
                                                           26));
  EXPECT_STREQ(escape.what(), "t.csv:2:3: found \"\\x1b[31mRED\\x1b[0m 39\\x006\\x7f\"");
  EXPECT_EQ(escape.message(), "found \"\\x1b[31mRED\\x1b[0m 39\\x006\\x7f\"");
  const std::string value = "\"" + std::string(10'000'000, '7') + "\"";
  const InputError huge({"t.csv", 2, 3, "ContextTokens"}, expected_found("an integer", value));
  const std::string what = huge.what();
  EXPECT_LE(what.size(), 1024U);
  EXPECT_EQ(what.find("t.csv:2:3: ContextTokens: expected an integer, found \"777"), 0U);
  EXPECT_NE(what.find(" bytes cut ...] 777"), std::string::npos);
  EXPECT_EQ(what.back(), '"');
  // Two-byte characters (\u00e9) across the cut: none is split.
  const InputError accents(
      {"", 0, 0, ""}, std::string(3000, 'a') + [] {
        std::string e;
        for (int i = 0; i < 1000; ++i)
          e += "\xc3\xa9";
        return e;
      }());
  const std::string cut = accents.what();
  const std::size_t marker = cut.find(" [...");
  ASSERT_NE(marker, std::string::npos);
  const std::size_t after = cut.find("...] ") + 5;
  EXPECT_NE(static_cast<unsigned char>(cut[after]) & 0xC0, 0x80U);
  // Idempotent: a message wrapped into another error is not escaped twice.
  const InputError wrapped({"", 0, 0, ""}, escape.message());
  EXPECT_EQ(wrapped.message(), escape.message());
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
