#include "exitsim/engine/safetensors.hpp"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "exitsim/core/error.hpp"
#include "exitsim/core/random.hpp"
#include "exitsim/traces/atomic_output.hpp"

namespace exitsim::engine {
namespace {

std::filesystem::path temp_path(const std::string& name) {
  return std::filesystem::path(testing::TempDir()) / ("exitsim_safetensors_" + name);
}

// A file of the raw format: little-endian length, header text, data bytes.
std::string raw_file(const std::string& header, const std::string& data, std::uint64_t length) {
  std::string bytes;
  for (int shift = 0; shift < 64; shift += 8)
    bytes.push_back(static_cast<char>((length >> shift) & 0xffu));
  return bytes + header + data;
}

std::string write_raw(const std::string& name, const std::string& bytes) {
  const std::filesystem::path path = temp_path(name);
  std::ofstream(path, std::ios::binary) << bytes;
  return path.string();
}

std::string write_header(const std::string& name, const std::string& header,
                         std::size_t data_bytes) {
  return write_raw(name, raw_file(header, std::string(data_bytes, '\0'), header.size()));
}

// The InputError message of `action`, or a marker that fails any comparison.
std::string error_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const InputError& e) {
    return e.what();
  }
  return "<no InputError>";
}

std::string open_error(const std::string& path) {
  return error_of([&] { SafetensorsFile::open(path); });
}

std::vector<unsigned char> file_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::uint32_t bits(float value) {
  return std::bit_cast<std::uint32_t>(value);
}

TEST(Safetensors, F32RoundTripIsBitExact) {
  const std::vector<float> values = {0.0f,
                                     -0.0f,
                                     1e-40f,
                                     3.14159265f,
                                     std::numeric_limits<float>::max(),
                                     -std::numeric_limits<float>::infinity(),
                                     std::numeric_limits<float>::quiet_NaN()};
  const std::vector<float> matrix = {1, 2, 3, 4, 5, 6};
  const std::filesystem::path path = temp_path("f32.safetensors");
  const std::vector<TensorToWrite> tensors = {{"values", DType::fp32, {7}, values},
                                              {"matrix", DType::fp32, {2, 3}, matrix},
                                              {"empty", DType::fp32, {0, 4}, {}}};
  write_safetensors(path, tensors, {{"format", "pt"}});

  SafetensorsFile file = SafetensorsFile::open(path);
  EXPECT_EQ(file.names(), (std::vector<std::string>{"empty", "matrix", "values"}));
  EXPECT_EQ(file.metadata().at("format"), "pt");
  EXPECT_EQ(file.info("matrix").dtype, "F32");
  EXPECT_EQ(file.info("matrix").shape, (std::vector<std::int64_t>{2, 3}));
  const std::vector<float> read = file.read_floats("values");
  ASSERT_EQ(read.size(), values.size());
  for (std::size_t i = 0; i < values.size(); ++i)
    EXPECT_EQ(bits(read[i]), bits(values[i])) << i;
  const Matrix m = file.read_matrix("matrix", 2, 3);
  EXPECT_EQ(m(1, 0), 4.0f);
  EXPECT_EQ(m(0, 2), 3.0f);
  EXPECT_TRUE(file.read_floats("empty").empty());
  // The header is padded so that the data section starts 8-byte aligned.
  const std::vector<unsigned char> bytes = file_bytes(path);
  EXPECT_EQ(bytes[0] % 8, 0);
  EXPECT_FALSE(
      std::filesystem::exists(traces::detail::AtomicOutputFile::temp_path_for(path.string())));
}

TEST(Safetensors, HalfConversionsRoundToNearestEven) {
  EXPECT_EQ(float_to_f16(1.0f), 0x3c00);
  EXPECT_EQ(float_to_f16(-2.0f), 0xc000);
  EXPECT_EQ(float_to_f16(65504.0f), 0x7bff);                      // largest finite half
  EXPECT_EQ(float_to_f16(65519.0f), 0x7bff);                      // below the halfway point
  EXPECT_EQ(float_to_f16(65520.0f), 0x7c00);                      // halfway: even is infinity
  EXPECT_EQ(float_to_f16(std::ldexp(1.0f, -14)), 0x0400);         // smallest normal
  EXPECT_EQ(float_to_f16(std::ldexp(1.0f, -24)), 0x0001);         // smallest subnormal
  EXPECT_EQ(float_to_f16(std::ldexp(1.0f, -25)), 0x0000);         // tie between 0 and 1: even 0
  EXPECT_EQ(float_to_f16(std::ldexp(3.0f, -25)), 0x0002);         // tie between 1 and 2: even 2
  EXPECT_EQ(float_to_f16(std::ldexp(1.5f, -25)), 0x0001);         // above the tie
  EXPECT_EQ(float_to_f16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);  // tie: even mantissa 0
  EXPECT_EQ(float_to_f16(1.0f + std::ldexp(3.0f, -11)), 0x3c02);  // tie: even mantissa 2
  EXPECT_EQ(float_to_f16(1e-40f), 0x0000);                        // binary32 subnormal
  EXPECT_EQ(float_to_f16(-std::numeric_limits<float>::infinity()), 0xfc00);
  EXPECT_EQ(float_to_f16(std::numeric_limits<float>::quiet_NaN()), 0x7e00);

  EXPECT_EQ(f16_to_float(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(f16_to_float(0x03ff), std::ldexp(1023.0f, -24));
  EXPECT_EQ(f16_to_float(0x7bff), 65504.0f);
  EXPECT_EQ(bits(f16_to_float(0x8000)), bits(-0.0f));
  EXPECT_EQ(f16_to_float(0x7c00), std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(f16_to_float(0x7e00)));
  EXPECT_TRUE(std::isnan(f16_to_float(0x7c01)));  // a signalling NaN stays NaN
}

TEST(Safetensors, BfloatConversionsRoundToNearestEven) {
  EXPECT_EQ(float_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(float_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);        // tie: even
  EXPECT_EQ(float_to_bf16(1.0f + std::ldexp(3.0f, -8)), 0x3f82);        // tie: even
  EXPECT_EQ(float_to_bf16(std::numeric_limits<float>::max()), 0x7f80);  // rounds to infinity
  EXPECT_EQ(float_to_bf16(1e-40f), 0x0001);                             // subnormal stays
  EXPECT_EQ(float_to_bf16(std::numeric_limits<float>::quiet_NaN()), 0x7fc0);
  EXPECT_EQ(float_to_bf16(std::bit_cast<float>(0x7f800001u)), 0x7fc0);  // NaN, never infinity
  EXPECT_EQ(bf16_to_float(0x3f80), 1.0f);
  EXPECT_EQ(bf16_to_float(0xff80), -std::numeric_limits<float>::infinity());
  EXPECT_EQ(bf16_to_float(0x0001), std::ldexp(1.0f, -133));
}

TEST(Safetensors, HalfAndBfloatFilesStoreLittleEndianBitsAndReadBack) {
  const std::vector<float> values = {1.0f, -2.0f, std::ldexp(1.0f, -24), 65520.0f};
  const std::filesystem::path path = temp_path("half.safetensors");
  const std::vector<TensorToWrite> tensors = {{"h", DType::fp16, {4}, values},
                                              {"b", DType::bf16, {2, 2}, values}};
  write_safetensors(path, tensors);
  SafetensorsFile file = SafetensorsFile::open(path);
  EXPECT_EQ(file.info("h").dtype, "F16");
  EXPECT_EQ(file.info("b").dtype, "BF16");
  const std::vector<float> h = file.read_floats("h");
  EXPECT_EQ(h, (std::vector<float>{1.0f, -2.0f, std::ldexp(1.0f, -24),
                                   std::numeric_limits<float>::infinity()}));
  EXPECT_EQ(file.read_floats("b", std::vector<std::int64_t>{2, 2}),
            (std::vector<float>{1.0f, -2.0f, std::ldexp(1.0f, -24), 65536.0f}));

  const std::vector<unsigned char> bytes = file_bytes(path);
  const std::size_t data = 8 + bytes[0] + 256u * bytes[1];
  const TensorInfo& info = file.info("h");
  EXPECT_EQ(bytes[data + info.begin], 0x00);  // 1.0 = 0x3c00, low byte first
  EXPECT_EQ(bytes[data + info.begin + 1], 0x3c);
}

TEST(Safetensors, WriterRejectsInconsistentTensors) {
  const std::vector<float> three = {1, 2, 3};
  const std::vector<TensorToWrite> wrong_count = {{"t", DType::fp32, {2, 2}, three}};
  EXPECT_THROW(write_safetensors(temp_path("bad.safetensors"), wrong_count), std::invalid_argument);
  const std::vector<TensorToWrite> twice = {{"t", DType::fp32, {3}, three},
                                            {"t", DType::fp32, {3}, three}};
  EXPECT_THROW(write_safetensors(temp_path("bad.safetensors"), twice), std::invalid_argument);
  const std::vector<TensorToWrite> int8 = {{"t", DType::int8, {3}, three}};
  EXPECT_THROW(write_safetensors(temp_path("bad.safetensors"), int8), std::invalid_argument);
  EXPECT_FALSE(std::filesystem::exists(temp_path("bad.safetensors")));
}

TEST(Safetensors, MissingFileAndTooShortFile) {
  const std::string missing = temp_path("missing.safetensors").string();
  EXPECT_EQ(open_error(missing), missing + ": expected a safetensors file, found none");
  const std::string path = write_raw("short.safetensors", "abc");
  EXPECT_EQ(open_error(path),
            path + ": header length: expected a file of at least 8 bytes, found 3 bytes");
}

TEST(Safetensors, HeaderLengthBeyondTheFile) {
  const std::string path = write_raw("long.safetensors", raw_file("{}", "", 1000));
  EXPECT_EQ(open_error(path),
            path + ": header length: expected at most 2 (the bytes after it), found 1000");
  const std::string huge = write_raw("huge.safetensors", raw_file("{}", "", ~0ull));
  EXPECT_EQ(open_error(huge), huge +
                                  ": header length: expected at most 2 (the bytes after it), "
                                  "found 18446744073709551615");
}

TEST(Safetensors, HeaderLengthOverTheLimit) {
  // A sparse file: the length is checked against the limit before anything is read.
  const std::string path =
      write_raw("limit.safetensors", raw_file("", "", k_max_safetensors_header_bytes + 1));
  std::filesystem::resize_file(path, k_max_safetensors_header_bytes + 16);
  EXPECT_EQ(open_error(path),
            path + ": header length: expected at most 100000000 bytes, found 100000001");
  std::filesystem::remove(path);
}

TEST(Safetensors, HeaderThatIsNotAJsonObject) {
  const std::string bad = write_header("badjson.safetensors", "{\"a\": x}", 0);
  EXPECT_EQ(open_error(bad), bad +
                                 ": header: expected valid JSON, found parse error at line 1, "
                                 "column 7: syntax error while parsing value - invalid literal; "
                                 "last read: '\"a\": x'");
  const std::string array = write_header("array.safetensors", "[1, 2]", 0);
  EXPECT_EQ(open_error(array), array + ": header: expected a JSON object, found the array [1,2]");
  const std::string deep = write_header("deep.safetensors", "{\"t\": {\"shape\": [[1]]}}", 0);
  EXPECT_EQ(open_error(deep),
            deep + ": header: expected at most 3 levels of nesting, found deeper nesting");
}

TEST(Safetensors, DuplicateTensorName) {
  const std::string entry = R"({"dtype": "F32", "shape": [1], "data_offsets": [0, 4]})";
  const std::string path =
      write_header("dup.safetensors", "{\"t\": " + entry + ", \"t\": " + entry + "}", 4);
  EXPECT_EQ(open_error(path),
            path + ": header: expected each key once per object, found the key \"t\" twice");
}

TEST(Safetensors, EntryFieldsMissingOrMistyped) {
  const std::string missing =
      write_header("nofield.safetensors", R"({"t": {"dtype": "F32", "shape": [1]}})", 4);
  EXPECT_EQ(open_error(missing), missing +
                                     ": t: expected \"dtype\", \"shape\" and \"data_offsets\", "
                                     "found no \"data_offsets\"");
  const std::string scalar = write_header("scalar.safetensors", R"({"t": 3})", 4);
  EXPECT_EQ(open_error(scalar), scalar +
                                    ": t: expected an object with \"dtype\", \"shape\" and "
                                    "\"data_offsets\", found the number 3");
  const std::string negative =
      write_header("negative.safetensors",
                   R"({"t": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})", 4);
  EXPECT_EQ(open_error(negative), negative +
                                      ": t: \"shape\": expected an array of non-negative "
                                      "integers, found the array [-1]");
  const std::string offsets = write_header(
      "offsets.safetensors", R"({"t": {"dtype": "F32", "shape": [1], "data_offsets": [0]}})", 4);
  EXPECT_EQ(open_error(offsets), offsets +
                                     ": t: \"data_offsets\": expected an array of two "
                                     "non-negative integers, found the array [0]");
  const std::string metadata =
      write_header("metadata.safetensors", R"({"__metadata__": {"format": 1}})", 0);
  EXPECT_EQ(open_error(metadata),
            metadata + ": __metadata__.format: expected a string, found the number 1");
}

TEST(Safetensors, UnknownDtype) {
  const std::string path = write_header(
      "dtype.safetensors", R"({"t": {"dtype": "Q4", "shape": [2], "data_offsets": [0, 1]}})", 1);
  EXPECT_EQ(open_error(path), path +
                                  ": t: \"dtype\": expected one of BOOL, U8, I8, F8_E5M2, "
                                  "F8_E4M3, I16, U16, F16, BF16, I32, U32, F32, I64, U64, F64, "
                                  "found \"Q4\"");
}

TEST(Safetensors, ShapeThatDoesNotMatchTheByteRange) {
  const std::string path =
      write_header("product.safetensors",
                   R"({"t": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 20]}})", 24);
  EXPECT_EQ(open_error(path), path +
                                  ": t: \"data_offsets\": expected 24 bytes for F32 of shape "
                                  "[2, 3], found 20 bytes in [0, 20]");
  const std::string overflow = write_header(
      "overflow.safetensors",
      R"({"t": {"dtype": "F32", "shape": [4294967296, 4294967296], "data_offsets": [0, 4]}})", 4);
  EXPECT_EQ(open_error(overflow), overflow +
                                      ": t: \"data_offsets\": expected more bytes than 64 bits "
                                      "count for F32 of shape [4294967296, 4294967296], found 4 "
                                      "bytes in [0, 4]");
}

TEST(Safetensors, ByteRangesOutsideTheDataOrReversed) {
  const std::string past = write_header(
      "past.safetensors", R"({"t": {"dtype": "F32", "shape": [6], "data_offsets": [0, 24]}})", 16);
  EXPECT_EQ(open_error(past), past +
                                  ": t: \"data_offsets\": expected a range within the 16-byte "
                                  "data section, found [0, 24]");
  const std::string reversed =
      write_header("reversed.safetensors",
                   R"({"t": {"dtype": "F32", "shape": [1], "data_offsets": [8, 4]}})", 16);
  EXPECT_EQ(open_error(reversed),
            reversed + ": t: \"data_offsets\": expected begin <= end, found [8, 4]");
}

TEST(Safetensors, OverlappingRanges) {
  const std::string path =
      write_header("overlap.safetensors",
                   R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                                            "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]},
                                            "e": {"dtype": "F32", "shape": [0], "data_offsets": [2, 2]}})",
                   12);
  EXPECT_EQ(open_error(path), path +
                                  ": b: \"data_offsets\": expected a range that does not overlap "
                                  "\"a\" at [0, 8], found [4, 12]");
}

TEST(Safetensors, ReadingChecksDtypeShapeAndName) {
  const std::string path =
      write_header("int8.safetensors",
                   R"({"i": {"dtype": "I8", "shape": [4], "data_offsets": [0, 4]},
                                            "f": {"dtype": "F32", "shape": [2, 2], "data_offsets": [4, 20]}})",
                   20);
  SafetensorsFile file = SafetensorsFile::open(path);
  EXPECT_EQ(error_of([&] { file.read_floats("i"); }),
            path + ": i: expected dtype F32, F16 or BF16, found I8");
  EXPECT_EQ(error_of([&] { file.read_matrix("f", 4, 1); }),
            path + ": f: expected shape [4, 1], found [2, 2]");
  EXPECT_EQ(error_of([&] { file.read_vector("f", 4); }),
            path + ": f: expected shape [4], found [2, 2]");
  EXPECT_EQ(error_of([&] { file.read_floats("nope"); }),
            path + ": nope: expected a tensor, found none");
  EXPECT_EQ(file.read_matrix("f", 2, 2), Matrix::Zero(2, 2));
}

TEST(Safetensors, ToleratesPaddingAndUnusedDtypes) {
  // Writers pad the header with spaces; tensors of dtypes we cannot read may sit in the file.
  const std::string path = write_header(
      "padded.safetensors",
      R"({"i": {"dtype": "I64", "shape": [1], "data_offsets": [0, 8]}})" + std::string(5, ' '), 8);
  SafetensorsFile file = SafetensorsFile::open(path);
  EXPECT_TRUE(file.has("i"));
  EXPECT_EQ(file.info("i").elements(), 1);
}

TEST(Safetensors, CorruptedFilesFailCleanly) {
  const std::vector<float> values = {1, 2, 3, 4, 5, 6};
  const std::filesystem::path source = temp_path("fuzz_source.safetensors");
  const std::vector<TensorToWrite> tensors = {{"a", DType::fp32, {2, 3}, values},
                                              {"b", DType::bf16, {6}, values}};
  write_safetensors(source, tensors, {{"k", "v"}});
  const std::vector<unsigned char> original = file_bytes(source);
  RandomStream random(1, "safetensors corruption");
  int rejected = 0;
  for (int trial = 0; trial < 1000; ++trial) {
    std::string bytes(original.begin(), original.end());
    const auto edits = random.uniform_int(1, 4);
    for (std::int64_t e = 0; e < edits; ++e) {
      const auto at = static_cast<std::size_t>(
          random.uniform_int(0, static_cast<std::int64_t>(bytes.size()) - 1));
      // Digits and JSON punctuation make plausible-but-wrong headers more often than noise.
      const std::string palette = "0123456789[]{},:\"-e \xff";
      bytes[at] = random.uniform_int(0, 1) == 0
                      ? palette[static_cast<std::size_t>(random.uniform_int(0, 16))]
                      : static_cast<char>(random.uniform_int(0, 255));
    }
    if (random.uniform_int(0, 9) == 0)
      bytes.resize(static_cast<std::size_t>(random.uniform_int(0, 40)));
    const std::string path = write_raw("fuzz.safetensors", bytes);
    try {
      SafetensorsFile file = SafetensorsFile::open(path);
      for (const std::string& name : file.names())
        file.read_floats(name);
    } catch (const InputError&) {
      ++rejected;
    }
  }
  EXPECT_GT(rejected, 250);
}

}  // namespace
}  // namespace exitsim::engine
