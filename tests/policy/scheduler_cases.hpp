#pragma once

// Shared by the scheduler tests: builders for sequences in each state, and a table-driven case
// runner that compares a decision with a compact expected string such as
//   "preempt[r2] admit[w0] work[r0:1 w0:16]"
// (r = running index, w = waiting index, :n = tokens).

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "exitsim/policy/scheduler.hpp"

namespace exitsim::policy::test {

inline constexpr std::int64_t k_block = 16;

inline std::int64_t blocks(std::int64_t tokens) {
  return (tokens + k_block - 1) / k_block;
}

// A new request: nothing computed, no blocks.
inline SequenceView arriving(std::uint64_t id, std::int64_t prompt) {
  return {RequestId{id}, 0, prompt, 0, 0, 0};
}

// Back in the waiting queue after preemption by recompute: its outputs so far are kept, its K/V
// is gone.
inline SequenceView preempted(std::uint64_t id, std::int64_t prompt, std::int64_t generated) {
  return {RequestId{id}, 0, prompt, generated, 0, 0};
}

// Running and decoding: everything but the last emitted token has K/V.
inline SequenceView decoding(std::uint64_t id, std::int64_t prompt, std::int64_t generated) {
  const std::int64_t computed = prompt + generated - 1;
  return {RequestId{id}, 0, prompt, generated, computed, blocks(computed)};
}

// Running, part of the prompt prefilled by earlier chunks.
inline SequenceView prefilling(std::uint64_t id, std::int64_t prompt, std::int64_t computed) {
  return {RequestId{id}, 0, prompt, 0, computed, blocks(computed)};
}

inline std::string describe(const SchedulerDecision& d) {
  std::string out = "preempt[";
  for (std::size_t i = 0; i < d.preempt.size(); ++i) {
    out += (i ? " r" : "r") + std::to_string(d.preempt[i]);
  }
  out += "] admit[";
  for (std::size_t i = 0; i < d.admit.size(); ++i) {
    out += (i ? " w" : "w") + std::to_string(d.admit[i]);
  }
  out += "] work[";
  for (std::size_t i = 0; i < d.work.size(); ++i) {
    if (i)
      out += " ";
    out += (d.work[i].sequence.waiting ? "w" : "r") + std::to_string(d.work[i].sequence.index) +
           ":" + std::to_string(d.work[i].tokens);
  }
  return out + "]";
}

struct Case {
  std::string name;
  std::vector<SequenceView> running;
  std::vector<SequenceView> waiting;
  KvView kv;  // block size k_block unless a case says otherwise
  SchedulerLimits limits;
  std::string expected;
};

inline KvView kv(std::int64_t total, std::int64_t free) {
  return {k_block, total, free, {}};
}
inline SchedulerLimits limits(std::int64_t max_running, std::int64_t max_batched_tokens) {
  return {max_running, max_batched_tokens};
}

// Runs `scheduler` on the case's snapshot; every decision must also pass check_decision().
inline void expect_decision(const Scheduler& scheduler, const Case& c) {
  const SchedulerSnapshot snapshot{c.running, c.waiting, c.kv, c.limits, 0};
  SchedulerDecision decision;
  scheduler.schedule(snapshot, decision);
  EXPECT_EQ(check_decision(snapshot, decision), "");
  EXPECT_EQ(describe(decision), c.expected);
}

inline std::string case_name(const testing::TestParamInfo<Case>& info) {
  return info.param.name;
}

}  // namespace exitsim::policy::test
