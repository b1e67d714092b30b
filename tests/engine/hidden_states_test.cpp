// The slot store the decoding loop keeps its hidden states in (hidden_states.hpp), on the host.
#include "exitsim/engine/hidden_states.hpp"

#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

namespace exitsim::engine {
namespace {

Matrix rows_of(std::initializer_list<std::initializer_list<float>> values) {
  Matrix m(static_cast<Eigen::Index>(values.size()),
           static_cast<Eigen::Index>(values.begin()->size()));
  Eigen::Index r = 0;
  for (const auto& row : values) {
    Eigen::Index c = 0;
    for (const float v : row)
      m(r, c++) = v;
    ++r;
  }
  return m;
}

TEST(HiddenStates, HandsOutTheLowestFreeSlotAndReusesReleasedOnes) {
  HostStates states(2);
  EXPECT_EQ(states.acquire(), 0);
  EXPECT_EQ(states.acquire(), 1);
  EXPECT_EQ(states.acquire(), 2);
  states.release(1);
  states.release(0);
  EXPECT_EQ(states.in_use(), 1);
  EXPECT_EQ(states.acquire(), 0);
  EXPECT_EQ(states.acquire(), 1);
  EXPECT_EQ(states.acquire(), 3);
}

TEST(HiddenStates, GrowingKeepsTheRowsHeld) {
  HostStates states(3);
  const StateSlot first = states.acquire();
  states.write(std::vector<StateSlot>{first}, rows_of({{1, 2, 3}}));
  const std::int64_t before = states.capacity();
  std::vector<StateSlot> more;
  for (std::int64_t i = 0; i < before; ++i)
    more.push_back(states.acquire());
  EXPECT_GT(states.capacity(), before);
  EXPECT_EQ(states.read(std::vector<StateSlot>{first}), rows_of({{1, 2, 3}}));
}

TEST(HiddenStates, CopiesRowsBetweenSlots) {
  HostStates states(2);
  const HeldStates a(states, 2);
  const HeldStates b(states, 2);
  states.write(a.slots(), rows_of({{1, 2}, {3, 4}}));
  const std::vector<StateSlot> crossed{b[1], b[0]};
  states.copy(a.slots(), crossed);
  EXPECT_EQ(states.read(b.slots()), rows_of({{3, 4}, {1, 2}}));
  EXPECT_EQ(states.read(a.slots()), rows_of({{1, 2}, {3, 4}}));
}

TEST(HiddenStates, RefusesSlotsNotHeldAndMismatchedRows) {
  HostStates states(2);
  const StateSlot held = states.acquire();
  EXPECT_THROW(states.release(held + 1), std::logic_error);
  EXPECT_THROW((void)states.read(std::vector<StateSlot>{held + 1}), std::logic_error);
  EXPECT_THROW(states.write(std::vector<StateSlot>{held}, rows_of({{1, 2}, {3, 4}})),
               std::logic_error);
  EXPECT_THROW(states.write(std::vector<StateSlot>{held}, rows_of({{1, 2, 3}})), std::logic_error);
  states.release(held);
  EXPECT_THROW(states.release(held), std::logic_error);
  EXPECT_THROW(HostStates(0), std::invalid_argument);
}

TEST(HeldStates, ReleasesItsSlotsWhenDestroyedOrResetAndMovesOwnership) {
  HostStates states(4);
  {
    const HeldStates batch(states, 3);
    EXPECT_EQ(states.in_use(), 3);
  }
  EXPECT_EQ(states.in_use(), 0);
  HeldStates one(states, 1);
  HeldStates moved = std::move(one);
  EXPECT_TRUE(one.empty());  // NOLINT(bugprone-use-after-move): moved-from is empty by contract
  EXPECT_EQ(states.in_use(), 1);
  HeldStates other(states, 2);
  other = std::move(moved);  // releases other's two slots
  EXPECT_EQ(states.in_use(), 1);
  other.reset();
  EXPECT_EQ(states.in_use(), 0);
}

}  // namespace
}  // namespace exitsim::engine
