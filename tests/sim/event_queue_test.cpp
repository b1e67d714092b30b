#include "exitsim/sim/event_queue.hpp"

#include <gtest/gtest.h>

#include <random>

namespace exitsim::sim {
namespace {

TEST(EventQueue, PopsInTimeOrderAndTiesInInsertionOrder) {
  EventQueue<int> queue;
  queue.push(30, 0);
  queue.push(10, 1);
  queue.push(10, 2);
  queue.push(20, 3);
  queue.push(10, 4);
  std::vector<int> order;
  while (!queue.empty())
    order.push_back(queue.pop().payload);
  EXPECT_EQ(order, (std::vector<int>{1, 2, 4, 3, 0}));
}

TEST(EventQueue, TimeNeverGoesBackwardsUnderRandomLoad) {
  EventQueue<std::uint64_t> queue;
  std::mt19937_64 rng(7);
  for (std::uint64_t i = 0; i < 10'000; ++i)
    queue.push(static_cast<TimeNs>(rng() % 1000), i);
  TimeNs last_time = -1;
  std::uint64_t last_sequence = 0;
  while (!queue.empty()) {
    const auto event = queue.pop();
    ASSERT_GE(event.time, last_time);
    if (event.time == last_time) {
      ASSERT_GT(event.sequence, last_sequence);
    }
    last_time = event.time;
    last_sequence = event.sequence;
  }
}

}  // namespace
}  // namespace exitsim::sim
