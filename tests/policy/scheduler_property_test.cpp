// Drives each scheduler with a tiny executor for thousands of iterations, with random arrivals
// and lengths and a small KV cache, and checks what must hold whatever the policy: every
// decision is feasible, blocks are conserved and never over-committed, every request emits
// exactly its output length, and everything finishes once arrivals stop.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "exitsim/policy/scheduler_registry.hpp"
#include "exitsim/policy/scheduler_steps.hpp"

namespace exitsim::policy {
namespace {

struct Load {
  std::string name;
  double arrival_probability = 0;  // per iteration
  std::int64_t max_prompt = 0;
  std::int64_t max_output = 0;
  KvView kv;
  SchedulerLimits limits;
};

struct Live {
  SequenceView view;
  std::int64_t output = 0;  // tokens the request emits in all
  std::int64_t arrival_iteration = 0;
};

struct Outcome {
  std::int64_t arrived = 0;
  std::int64_t finished = 0;
  std::int64_t max_latency = 0;  // iterations from arrival to the last token
  std::int64_t preemptions = 0;
  std::int64_t chunked = 0;  // work items that processed part of a sequence's pending tokens
};

// Applies decisions exactly as scheduler.hpp specifies, to plain vectors.
class ToyReplica {
 public:
  explicit ToyReplica(const Load& load) : load_(load), free_(load.kv.total_blocks) {}

  void arrive(std::uint64_t id, std::int64_t prompt, std::int64_t output, std::int64_t now) {
    waiting_.push_back({{RequestId{id}, now, prompt, 0, 0, 0}, output, now});
    ++outcome_.arrived;
  }

  bool idle() const { return running_.empty() && waiting_.empty(); }
  const Outcome& outcome() const { return outcome_; }
  std::int64_t free_blocks() const { return free_; }

  // One iteration; false (with a test failure) when the decision is infeasible.
  bool step(const Scheduler& scheduler, std::int64_t now) {
    running_views_.clear();
    waiting_views_.clear();
    for (const Live& s : running_)
      running_views_.push_back(s.view);
    for (const Live& s : waiting_)
      waiting_views_.push_back(s.view);
    KvView kv = load_.kv;
    kv.free_blocks = free_;
    const SchedulerSnapshot snapshot{running_views_, waiting_views_, kv, load_.limits, now};
    decision_.clear();
    scheduler.schedule(snapshot, decision_);
    const std::string problem = check_decision(snapshot, decision_);
    if (!problem.empty()) {
      ADD_FAILURE() << scheduler.name() << " at iteration " << now << ": " << problem;
      return false;
    }

    for (std::size_t i : decision_.preempt) {
      Live& victim = running_[i];
      free_ += victim.view.kv_blocks;
      victim.view.kv_blocks = 0;
      victim.view.computed_tokens = 0;
      ++outcome_.preemptions;
    }
    for (const ScheduledWork& work : decision_.work) {
      Live& s =
          work.sequence.waiting ? waiting_[work.sequence.index] : running_[work.sequence.index];
      const std::int64_t grow = blocks_to_grow(s.view, work.tokens, kv);
      free_ -= grow;
      EXPECT_GE(free_, 0) << "blocks over-committed at iteration " << now;
      s.view.kv_blocks += grow;
      if (work.tokens < s.view.pending_tokens())
        ++outcome_.chunked;
      s.view.computed_tokens += work.tokens;
      if (s.view.pending_tokens() == 0)
        ++s.view.generated_tokens;  // emits its next token
    }

    // Victims to the front of the waiting queue in the order listed, admitted to the end of the
    // running set in the order listed, finished sequences out.
    next_running_.clear();
    next_waiting_.clear();
    for (std::size_t i : decision_.preempt)
      next_waiting_.push_back(running_[i]);
    for (std::size_t i = 0; i < waiting_.size(); ++i) {
      if (std::find(decision_.admit.begin(), decision_.admit.end(), i) == decision_.admit.end()) {
        next_waiting_.push_back(waiting_[i]);
      }
    }
    for (std::size_t i = 0; i < running_.size(); ++i) {
      if (std::find(decision_.preempt.begin(), decision_.preempt.end(), i) ==
          decision_.preempt.end()) {
        next_running_.push_back(running_[i]);
      }
    }
    for (std::size_t i : decision_.admit)
      next_running_.push_back(waiting_[i]);
    running_.clear();
    for (const Live& s : next_running_) {
      EXPECT_LE(s.view.generated_tokens, s.output) << "emitted past the output length";
      if (s.view.generated_tokens == s.output) {
        free_ += s.view.kv_blocks;
        ++outcome_.finished;
        outcome_.max_latency = std::max(outcome_.max_latency, now + 1 - s.arrival_iteration);
      } else {
        running_.push_back(s);
      }
    }
    waiting_.swap(next_waiting_);

    std::int64_t held = 0;
    for (const Live& s : running_)
      held += s.view.kv_blocks;
    for (const Live& s : waiting_)
      held += s.view.kv_blocks;
    EXPECT_EQ(held + free_, load_.kv.total_blocks) << "blocks leaked at iteration " << now;
    return true;
  }

 private:
  Load load_;
  std::int64_t free_;
  std::vector<Live> running_, waiting_, next_running_, next_waiting_;
  std::vector<SequenceView> running_views_, waiting_views_;
  SchedulerDecision decision_;
  Outcome outcome_;
};

Outcome drive(const Scheduler& scheduler, const Load& load, std::uint64_t seed) {
  constexpr std::int64_t k_arrival_iterations = 4000;
  constexpr std::int64_t k_drain_limit = 200000;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> coin(0.0, 1.0);
  std::uniform_int_distribution<std::int64_t> prompt(1, load.max_prompt);
  std::uniform_int_distribution<std::int64_t> output(1, load.max_output);
  ToyReplica replica(load);
  std::uint64_t next_id = 0;
  std::int64_t now = 0;
  for (; now < k_arrival_iterations; ++now) {
    if (coin(rng) < load.arrival_probability) {
      const std::int64_t p = prompt(rng);
      replica.arrive(next_id++, p, output(rng), now);
    }
    if (!replica.step(scheduler, now))
      return replica.outcome();
  }
  for (; !replica.idle() && now < k_arrival_iterations + k_drain_limit; ++now) {
    if (!replica.step(scheduler, now))
      return replica.outcome();
  }
  EXPECT_TRUE(replica.idle()) << scheduler.name() << " did not drain: some sequence starves";
  EXPECT_EQ(replica.free_blocks(), load.kv.total_blocks) << "blocks not all free at the end";
  return replica.outcome();
}

// Prompt plus output stays within the token budget and the blocks: a recompute after
// preemption prefills both at once, so larger requests would be impossible configurations.
Load light(std::int64_t max_batched_tokens) {
  return {"light", 0.04, 40, 30, {2, 200, 0}, {8, max_batched_tokens}};
}
Load heavy(std::int64_t max_batched_tokens) {
  return {"heavy", 0.1, 40, 30, {2, 40, 0}, {8, max_batched_tokens}};
}
// Prompts nearly as large as the cache: partial prefills can fill it between them.
Load long_prompts(std::int64_t max_batched_tokens) {
  return {"long_prompts", 0.2, 62, 8, {2, 36, 0}, {8, max_batched_tokens}};
}
Load watermarked(std::int64_t max_batched_tokens) {
  return {"watermarked", 0.2, 40, 30, {2, 150, 0}, {6, max_batched_tokens}};
}

struct PropertyCase {
  std::string scheduler;
  std::int64_t max_batched_tokens;
};

class SchedulerProperties : public testing::TestWithParam<PropertyCase> {};

TEST_P(SchedulerProperties, FeasibleConservingAndLive) {
  const std::unique_ptr<Scheduler> scheduler = make_scheduler(GetParam().scheduler, {});
  for (const Load& load :
       {light(GetParam().max_batched_tokens), heavy(GetParam().max_batched_tokens),
        long_prompts(GetParam().max_batched_tokens), watermarked(GetParam().max_batched_tokens)}) {
    for (std::uint64_t seed = 1; seed <= 3; ++seed) {
      SCOPED_TRACE(load.name + " load, seed " + std::to_string(seed));
      const Outcome outcome = drive(*scheduler, load, seed);
      EXPECT_GT(outcome.arrived, 50);
      EXPECT_EQ(outcome.finished, outcome.arrived);
      if (load.name == "light") {
        // A lone request needs at most its output plus a few prefill chunks; under light load
        // nobody waits long behind others.
        EXPECT_LE(outcome.max_latency, 150);
      }
      if (load.name == "heavy") {
        EXPECT_GT(outcome.preemptions, 0);
      }
      if (GetParam().scheduler == "chunked_prefill") {
        EXPECT_GT(outcome.chunked, 0);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Builtins, SchedulerProperties,
                         testing::Values(PropertyCase{"static", 72}, PropertyCase{"continuous", 72},
                                         PropertyCase{"chunked_prefill", 16},
                                         PropertyCase{"shortest_prompt_first", 72}),
                         [](const testing::TestParamInfo<PropertyCase>& param) {
                           return param.param.scheduler;
                         });

// The same snapshot gives the same decision, and a reused decision keeps its storage.
TEST(SchedulerProperties, DecisionsAreDeterministicAndReuseStorage) {
  const std::vector<SequenceView> running = {{RequestId{1}, 0, 16, 1, 16, 1},
                                             {RequestId{2}, 0, 16, 1, 16, 1},
                                             {RequestId{3}, 0, 8, 2, 9, 1}};
  const std::vector<SequenceView> waiting = {{RequestId{4}, 0, 30, 0, 0, 0},
                                             {RequestId{5}, 0, 5, 0, 0, 0}};
  const SchedulerSnapshot snapshot{running, waiting, {16, 10, 1}, {8, 20}, 0};
  for (const std::string& name : scheduler_names()) {
    const std::unique_ptr<Scheduler> scheduler = make_scheduler(name, {});
    SchedulerDecision first;
    scheduler->schedule(snapshot, first);
    SchedulerDecision again = first;
    again.work.reserve(16);
    again.preempt.reserve(16);
    again.admit.reserve(16);
    const auto* work_storage = again.work.data();
    for (int i = 0; i < 3; ++i) {
      again.clear();
      scheduler->schedule(snapshot, again);
      EXPECT_EQ(again.preempt, first.preempt) << name;
      EXPECT_EQ(again.admit, first.admit) << name;
      EXPECT_EQ(again.work, first.work) << name;
      EXPECT_EQ(again.work.data(), work_storage) << name;
    }
  }
}

}  // namespace
}  // namespace exitsim::policy
