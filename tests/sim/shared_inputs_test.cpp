// Files a simulation reads besides its scenario are read once per process: a sweep's hundreds of
// runs share one parsed profile; a file rewritten in place is read again; a failed read is not
// kept.
#include "exitsim/sim/inputs/shared_inputs.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "exitsim/core/error.hpp"

namespace exitsim::sim {
namespace {

std::string write_profile(const std::string& name, const std::string& hardware) {
  CostProfile profile;
  profile.source = {"exitsim-engine", "cpu", hardware, "m", "d1", {"t"}};
  profile.ops.push_back({"attention", "attention", {{1, {1, 0, 0, 0}}}, 1, 0, 0, 0, 1, 1});
  const std::string path = (std::filesystem::path(testing::TempDir()) / name).string();
  profile.write(path);
  return path;
}

TEST(SharedInputs, AProfileIsReadOnceAndSharedUntilItsFileChanges) {
  const std::string path = write_profile("shared_inputs_profile.json", "cpu a");
  const std::size_t before = shared_input_reads();
  const auto first = shared_cost_profile(path);
  const auto again = shared_cost_profile(path);
  EXPECT_EQ(first.get(), again.get());
  EXPECT_EQ(shared_input_reads(), before + 1);
  EXPECT_EQ(first->source.hardware, "cpu a");

  // Rewritten with another size: read again, and the old copy stays valid for its holders.
  write_profile("shared_inputs_profile.json", "another cpu, b");
  const auto changed = shared_cost_profile(path);
  EXPECT_NE(changed.get(), first.get());
  EXPECT_EQ(changed->source.hardware, "another cpu, b");
  EXPECT_EQ(first->source.hardware, "cpu a");
  EXPECT_EQ(shared_input_reads(), before + 2);
}

TEST(SharedInputs, AFailedReadIsNotKept) {
  const std::string path =
      (std::filesystem::path(testing::TempDir()) / "shared_inputs_missing.json").string();
  std::filesystem::remove(path);
  EXPECT_THROW(shared_cost_profile(path), InputError);
  write_profile("shared_inputs_missing.json", "cpu c");
  EXPECT_EQ(shared_cost_profile(path)->source.hardware, "cpu c");
}

}  // namespace
}  // namespace exitsim::sim
