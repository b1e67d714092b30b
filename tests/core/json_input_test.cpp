// The shared JSON reader's limits: nesting, duplicate keys, NUL, size caps (plain and gzip),
// and messages that show a value in bounded space whatever its depth or size.
#include "exitsim/core/json_input.hpp"

#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "exitsim/core/error.hpp"

namespace exitsim {
namespace {

using nlohmann::json;

std::string error_of(const std::function<void()>& read) {
  try {
    read();
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

std::string parse_error(std::string_view text, std::uint64_t max_bytes = 16u << 20) {
  return error_of([&] { parse_json(text, JsonInput{"f.json", "a thing", max_bytes}); });
}

std::string nested(int levels) {
  return std::string(static_cast<std::size_t>(levels), '[') +
         std::string(static_cast<std::size_t>(levels), ']');
}

class JsonFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("exitsim_json_input_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string write(const std::string& name, const std::string& text) const {
    const std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }
  // `head`, `repeats` copies of `chunk`, then `tail`, gzip-compressed: a small file for a large
  // text.
  std::string write_gzip(const std::string& name, const std::string& head, const std::string& chunk,
                         int repeats, const std::string& tail) const {
    const std::string path = (dir_ / name).string();
    gzFile out = gzopen(path.c_str(), "wb9");
    gzwrite(out, head.data(), static_cast<unsigned>(head.size()));
    for (int i = 0; i < repeats; ++i)
      gzwrite(out, chunk.data(), static_cast<unsigned>(chunk.size()));
    gzwrite(out, tail.data(), static_cast<unsigned>(tail.size()));
    gzclose(out);
    return path;
  }

  std::filesystem::path dir_;
};

TEST(JsonInput, ThirtyTwoLevelsOfNestingAreRead) {
  EXPECT_EQ(parse_json(nested(32), JsonInput{"f.json"}).dump(), nested(32));
}

// N1: 100,000 levels (200 kB) were built as a tree, then dump() recursed once per level and
// overflowed the stack. The 33rd level is refused before it is built.
TEST(JsonInput, DeepNestingIsRefusedAtTheThirtyThirdLevel) {
  EXPECT_EQ(parse_error(nested(33)),
            "f.json: expected at most 32 levels of nesting, found deeper nesting at byte 33");
  EXPECT_EQ(parse_error(nested(100000)),
            "f.json: expected at most 32 levels of nesting, found deeper nesting at byte 33");
  std::string objects;
  for (int i = 0; i < 100000; ++i)
    objects += "{\"a\":";
  EXPECT_EQ(parse_error(objects),
            "f.json: expected at most 32 levels of nesting, found deeper nesting at byte 161");
}

// N15: duplicate keys were refused in config.json, last-wins in Kineto and benchmark results.
TEST(JsonInput, AKeyTwiceInOneObjectIsRefused) {
  EXPECT_EQ(parse_error(R"({"a": 1, "b": {"a": 2}, "a": 3})"),
            "f.json: expected each key once per object, found the key \"a\" again at byte 27");
  // Past the short list, in the hash set a large object's keys go to.
  std::string many = "{";
  for (int i = 0; i < 100; ++i)
    many += "\"k" + std::to_string(i) + "\": " + std::to_string(i) + ", ";
  EXPECT_EQ(parse_error(many + "\"k57\": 0}").find("found the key \"k57\" again at byte"),
            std::string("f.json: expected each key once per object, ").size());
  // The same key in sibling objects is no repeat.
  EXPECT_EQ(parse_json(R"([{"a": 1}, {"a": 2}])", JsonInput{"f.json"}).size(), 2U);
}

TEST(JsonInput, MalformedTextNulAndHugeNumbersAreRefusedByName) {
  EXPECT_EQ(parse_error("{\"a\": tru}"), "f.json: expected a thing, found invalid JSON at byte 10");
  EXPECT_EQ(parse_error(std::string("{}\0{}", 5)),
            "f.json: expected a thing, found a NUL byte at byte 3");
  EXPECT_EQ(parse_error("[1e400]"),
            "f.json: expected JSON numbers within the range of a double, found number overflow "
            "parsing '1e400'");
  EXPECT_EQ(parse_json("\xEF\xBB\xBF[1]", JsonInput{"f.json"}).dump(), "[1]");
}

// Runs of whitespace between tokens reach the parser as one byte (nlohmann would keep them all
// for its messages: a gzip of 1 GiB of spaces held 1 GiB); inside strings they are kept, and
// positions in messages still count every byte of the file (an error found at a whitespace byte
// is placed at the end of its run).
TEST(JsonInput, WhitespaceRunsAreCollapsedOutsideStringsOnly) {
  EXPECT_EQ(parse_json("[1,\n     \t  \"a  \\\"  b\"   ,  2]", JsonInput{"f.json"}).dump(),
            R"([1,"a  \"  b",2])");
  EXPECT_EQ(parse_error("[1,          x]"),
            "f.json: expected a thing, found invalid JSON at byte 14");
  EXPECT_EQ(parse_error("[1,      "), "f.json: expected a thing, found invalid JSON at byte 10");
  EXPECT_EQ(parse_error("[tr  ue]"), "f.json: expected a thing, found invalid JSON at byte 5");
}

TEST(JsonInput, TextBeyondTheCapIsRefusedWithTheCap) {
  EXPECT_EQ(parse_error(std::string((1u << 20) + 1, ' '), 1u << 20),
            "f.json: expected at most 1 MiB of JSON, found 1048577 bytes");
}

// A reader's filter drops what it has used (ShareGPT keeps one conversation at a time), and the
// limits hold inside the dropped values too.
TEST(JsonInput, AFilterSeesValuesAfterTheLimits) {
  int elements = 0;
  const JsonFilter count = [&](int depth, json::parse_event_t event, json&) {
    if (depth == 1 && event == json::parse_event_t::object_end) {
      ++elements;
      return false;
    }
    return true;
  };
  EXPECT_EQ(parse_json(R"([{"a": 1}, {"a": 2}])", JsonInput{"f.json"}, count).dump(), "[]");
  EXPECT_EQ(elements, 2);
  EXPECT_EQ(
      error_of([&] { parse_json(R"([{"a": 1}, {"a": 2, "a": 3}])", JsonInput{"f.json"}, count); }),
      "f.json: expected each key once per object, found the key \"a\" again at byte 23");
}

TEST(JsonInput, AStreamIsCappedAsItIsRead) {
  std::istringstream in(std::string(3u << 20, ' ') + "[]");
  EXPECT_EQ(error_of([&] {
              parse_json(in, JsonInput{"p", "JSON", 1u << 20});
            }),
            "p: expected at most 1 MiB of JSON, found more");
  std::istringstream bom("\xEF\xBB\xBF{\"a\": [1]}");
  EXPECT_EQ(parse_json(bom, JsonInput{"p"}).dump(), R"({"a":[1]})");
}

TEST_F(JsonFileTest, AFileBeyondItsCapIsRefusedBeforeItIsRead) {
  const std::string path = write("big.json", std::string((1u << 20) + 2, ' '));
  EXPECT_EQ(error_of([&] {
              read_json_file(JsonInput{path, "JSON", 1u << 20});
            }),
            path + ": expected at most 1 MiB of JSON, found 1048578 bytes");
  EXPECT_EQ(error_of([&] { read_text_file(path, 1u << 20, "a plan"); }),
            path + ": expected at most 1 MiB of a plan, found 1048578 bytes");
  EXPECT_EQ(
      error_of([&] { read_json_file(JsonInput{(dir_ / "none.json").string()}); }),
      (dir_ / "none.json").string() + ": cannot open the JSON file: No such file or directory");
  EXPECT_EQ(error_of([&] { read_json_file(JsonInput{dir_.string()}); }),
            dir_.string() + ": cannot open the JSON file: Is a directory");
}

TEST_F(JsonFileTest, GzipIsInflatedAsItIsParsed) {
  const std::string path = write_gzip("t.json.gz", "[", "1, ", 1000, "2]");
  const JsonInput input{path, "JSON", 1u << 20, 1u << 20};
  EXPECT_EQ(read_json_file(input, [](int depth, json::parse_event_t, json&) { return depth == 0; })
                .dump(),
            "[]");
  EXPECT_EQ(read_json_file(input).size(), 1001U);
  // Without a gzip cap, a reader takes gzip for what it is: not JSON.
  EXPECT_EQ(error_of([&] { read_json_file(JsonInput{path}); }),
            path + ": expected JSON, found a NUL byte at byte 4");
}

// N5: a 1 MB gzip inflated whole to 3 GB. Inflation stops at the cap: a 4 KB file of 4 MiB of
// spaces against a 1 MiB cap.
TEST_F(JsonFileTest, AGzipBombStopsAtTheInflatedCap) {
  const std::string path =
      write_gzip("bomb.json.gz", "", std::string(1u << 20, ' '), 4, R"({"traceEvents": []})");
  ASSERT_LT(std::filesystem::file_size(path), 16u << 10);
  EXPECT_EQ(error_of([&] {
              read_json_file(JsonInput{path, "JSON", 1u << 20, 1u << 20});
            }),
            path + ": expected at most 1 MiB of JSON once inflated, found more");
  EXPECT_EQ(error_of([&] {
              read_json_file(JsonInput{path, "JSON", 8u << 20, 1000});
            }),
            path + ": expected at most 1000 bytes of gzip, found " +
                std::to_string(std::filesystem::file_size(path)) + " bytes");
}

TEST(JsonShown, ShowsShortValuesWholeAndCutsLongOnesAtSixtyBytes) {
  EXPECT_EQ(json_shown(json::parse(R"({"a": [1, "x\u001b"]})")), R"({"a":[1,"x\u001b"]})");
  EXPECT_EQ(json_shown(json(std::string(10u << 20, 'x'))), "\"" + std::string(59, 'x') + "...");
  EXPECT_EQ(json_shown(json("\xC3\xA9" + std::string(100, 'y'))).size(), 63U);
}

// A value built deeper than any parse allows is shown without recursing through it.
TEST(JsonShown, ShowsAValueOfAnyDepthInBoundedSpace) {
  json deep = json::array();
  for (int i = 0; i < 100000; ++i)
    deep = json::array({std::move(deep)});
  EXPECT_EQ(json_shown(deep), std::string(60, '[') + "...");
}

}  // namespace
}  // namespace exitsim
