// read_bounded_file: the one bounded whole-file read (the engine's text files; a scenario-sized
// cap works the same). The limits are small here so that the files are too.
#include "exitsim/core/input_file.hpp"

#include <gtest/gtest.h>

#include <string>

#include "support/test_files.hpp"

namespace exitsim {
namespace {

using test_support::error_of;
using test_support::TempDir;

// A file of exactly the limit is read whole; one byte more is refused, naming the file and the
// limit as people write it. 200,000 bytes spans four of the reader's 64 KiB chunks, so the
// refusal is decided across chunk boundaries, not within the first read.
TEST(ReadBoundedFile, ReadsUpToTheLimitAndRefusesOneByteMore) {
  TempDir dir;
  const std::string at_limit = dir.write("at_limit.txt", std::string(200000, 'a'));
  EXPECT_EQ(read_bounded_file(at_limit, "text file", 200000), std::string(200000, 'a'));
  const std::string over = dir.write("over.txt", std::string(200001, 'a'));
  EXPECT_EQ(error_of([&] { read_bounded_file(over, "text file", 200000); }),
            over + ": expected a text file of at most 200000 bytes, found a larger file");
  const std::string mib = dir.write("mib.txt", std::string((1 << 20) + 1, 'a'));
  EXPECT_EQ(error_of([&] { read_bounded_file(mib, "scenario", 1 << 20); }),
            mib + ": expected a scenario of at most 1 MiB, found a larger file");
}

TEST(ReadBoundedFile, AMissingFileOrADirectoryIsOneLineNamingIt) {
  TempDir dir;
  EXPECT_EQ(error_of([&] { read_bounded_file(dir.path("none.txt"), "text file", 10); }),
            dir.path("none.txt") + ": cannot open the text file: No such file or directory");
  EXPECT_EQ(error_of([&] { read_bounded_file(dir.path(""), "text file", 10); }),
            dir.path("") + ": cannot open the text file: Is a directory");
}

}  // namespace
}  // namespace exitsim
