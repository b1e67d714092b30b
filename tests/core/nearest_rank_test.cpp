#include "exitsim/core/nearest_rank.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace exitsim::core {
namespace {

TEST(NearestRank, IsTheSmallestRankCoveringTheQuantile) {
  EXPECT_EQ(nearest_rank(0.0, 10), 1);
  EXPECT_EQ(nearest_rank(1.0, 10), 10);
  EXPECT_EQ(nearest_rank(0.5, 4), 2);
  EXPECT_EQ(nearest_rank(0.51, 4), 3);
  EXPECT_EQ(nearest_rank(0.5, 1), 1);
  EXPECT_EQ(nearest_rank(0.99, 100), 99);
  // 0.29 * 100 is 28.999999999999996 in binary; it still means rank 29, not 29 rounded up to 30.
  EXPECT_EQ(nearest_rank(0.29, 100), 29);
  EXPECT_EQ(nearest_rank(0.999, 1000), 999);
}

// 0.28 * 25 is 7.000000000000001 in binary: without the slack the 8th value would be taken.
// Values are given unsorted: the function sorts its copy.
TEST(NearestRank, TheValueIsTheSortedValueAtThatRank) {
  std::vector<double> values;
  for (int v = 25; v >= 1; --v)
    values.push_back(v * 10.0);
  EXPECT_EQ(nearest_rank_value(values, 0.28), 70.0);
  EXPECT_EQ(nearest_rank_value(values, 0.5), 130.0);  // rank 13 of 25
  EXPECT_EQ(nearest_rank_value(values, 0.0), 10.0);
  EXPECT_EQ(nearest_rank_value(values, 1.0), 250.0);
  EXPECT_EQ(nearest_rank_value({}, 0.5), 0.0);
}

}  // namespace
}  // namespace exitsim::core
