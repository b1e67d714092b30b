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

#include "exitsim/policy/apply_decision.hpp"
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
  std::int64_t chunked = 0;        // work items that processed part of a sequence's pending tokens
  std::int64_t stored_blocks = 0;  // blocks held after each step, summed over steps
  std::int64_t full_depth_blocks = 0;  // the same, had every token stored K/V everywhere
};

struct ToyQueue {
  std::vector<Live> items;

  std::size_t size() const { return items.size(); }
  Live at(std::size_t i) const { return items[i]; }
  void push_back(const Live& s) { items.push_back(s); }
  void push_front(const Live& s) { items.insert(items.begin(), s); }
  void remove(std::span<const std::size_t> sorted) {
    for (std::size_t k = sorted.size(); k-- > 0;)
      items.erase(items.begin() + static_cast<std::ptrdiff_t>(sorted[k]));
  }
};

// Applies decisions with the shared apply_decision, to plain vectors, as a K/V manager of its
// own: with a skipping load, a two-group layout (kv_layout.hpp) where each decode token stores
// K/V in the second group only with probability one half, as skip_kv's exited tokens do. It
// allocates from its own rows, not from the scheduler's arithmetic, so "never over-committed"
// is judged by what it stores.
class ToyReplica {
 public:
  explicit ToyReplica(const Load& load, std::uint64_t seed)
      : load_(load), free_(load.kv.total_blocks), exits_(seed) {}

  void arrive(std::uint64_t id, std::int64_t prompt, std::int64_t output, std::int64_t now) {
    waiting_.items.push_back({{RequestId{id}, now, prompt, 0, 0, 0, {}}, output, now});
    ++outcome_.arrived;
  }

  bool idle() const { return running_.items.empty() && waiting_.items.empty(); }
  const Outcome& outcome() const { return outcome_; }
  std::int64_t free_blocks() const { return free_; }

  // One iteration; false (with a test failure) when the decision is infeasible.
  bool step(const Scheduler& scheduler, std::int64_t now) {
    running_views_.clear();
    waiting_views_.clear();
    for (const Live& s : running_.items)
      running_views_.push_back(s.view);
    for (const Live& s : waiting_.items)
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
    apply_decision(decision_, running_, waiting_, scratch_, work_, [&](Live& victim) {
      free_ += victim.view.kv_blocks;
      victim.view = preempted_view(victim.view);
      ++outcome_.preemptions;
    });

    for (std::size_t i = 0; i < running_.items.size(); ++i) {
      if (work_[i] == 0)
        continue;
      Live& s = running_.items[i];
      const bool decode = s.view.is_decoding();
      if (work_[i] < s.view.pending_tokens())
        ++outcome_.chunked;
      // A prefill stores every token in both groups; a decode token skips the second half.
      const bool skips = decode && kv.groups.count > 1 && coin_(exits_) < 0.5;
      s.view.computed_tokens += work_[i];
      if (skips)
        s.view.kv_row_offset[1] -= 1;
      const std::int64_t held = kv_footprint(s.view, 0, kv);
      free_ -= held - s.view.kv_blocks;
      EXPECT_GE(free_, 0) << "blocks over-committed at iteration " << now;
      s.view.kv_blocks = held;
      outcome_.full_depth_blocks +=
          kv.groups.total_instances() * kv.blocks_for(s.view.computed_tokens);
      outcome_.stored_blocks += held;
      if (s.view.pending_tokens() == 0)
        ++s.view.generated_tokens;  // emits its next token
    }

    std::vector<Live> still;
    for (const Live& s : running_.items) {
      EXPECT_LE(s.view.generated_tokens, s.output) << "emitted past the output length";
      if (s.view.generated_tokens == s.output) {
        free_ += s.view.kv_blocks;
        ++outcome_.finished;
        outcome_.max_latency = std::max(outcome_.max_latency, now + 1 - s.arrival_iteration);
      } else {
        still.push_back(s);
      }
    }
    running_.items.swap(still);

    std::int64_t held = 0;
    for (const Live& s : running_.items)
      held += s.view.kv_blocks;
    for (const Live& s : waiting_.items)
      held += s.view.kv_blocks;
    EXPECT_EQ(held + free_, load_.kv.total_blocks) << "blocks leaked at iteration " << now;
    return true;
  }

 private:
  Load load_;
  std::int64_t free_;
  std::mt19937_64 exits_;
  std::uniform_real_distribution<double> coin_{0.0, 1.0};
  ToyQueue running_, waiting_;
  std::vector<SequenceView> running_views_, waiting_views_;
  SchedulerDecision decision_;
  DecisionScratch<Live> scratch_;
  std::vector<std::int64_t> work_;
  Outcome outcome_;
};

Outcome drive(const Scheduler& scheduler, const Load& load, std::uint64_t seed) {
  constexpr std::int64_t k_arrival_iterations = 4000;
  constexpr std::int64_t k_drain_limit = 200000;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> coin(0.0, 1.0);
  std::uniform_int_distribution<std::int64_t> prompt(1, load.max_prompt);
  std::uniform_int_distribution<std::int64_t> output(1, load.max_output);
  ToyReplica replica(load, seed);
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
  return {"light", 0.04, 40, 30, {2, 200, 0, {}}, {8, max_batched_tokens}};
}
Load heavy(std::int64_t max_batched_tokens) {
  return {"heavy", 0.1, 40, 30, {2, 40, 0, {}}, {8, max_batched_tokens}};
}
// Prompts nearly as large as the cache: partial prefills can fill it between them.
Load long_prompts(std::int64_t max_batched_tokens) {
  return {"long_prompts", 0.2, 62, 8, {2, 36, 0, {}}, {8, max_batched_tokens}};
}
Load watermarked(std::int64_t max_batched_tokens) {
  return {"watermarked", 0.2, 40, 30, {2, 150, 0, {}}, {6, max_batched_tokens}};
}
// The heavy load on a K/V manager of two row groups whose decode tokens skip the second half
// of the time (skip_kv): sequences hold fewer blocks than every layer of every token.
Load skipping(std::int64_t max_batched_tokens) {
  KvGroups two;
  two.count = 2;
  two.instances = {1, 1};
  return {"skipping", 0.1, 40, 30, {2, 80, 0, two}, {8, max_batched_tokens}};
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
        long_prompts(GetParam().max_batched_tokens), watermarked(GetParam().max_batched_tokens),
        skipping(GetParam().max_batched_tokens)}) {
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
      if (load.name == "heavy" || load.name == "skipping") {
        EXPECT_GT(outcome.preemptions, 0);
      }
      if (load.name == "skipping") {
        // Half the decode tokens keep no K/V in the second group: the executor holds less than
        // full depth would, and the scheduler's growth arithmetic followed its rows.
        EXPECT_LT(static_cast<double>(outcome.stored_blocks),
                  0.95 * static_cast<double>(outcome.full_depth_blocks));
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
  const SchedulerSnapshot snapshot{running, waiting, {16, 10, 1, {}}, {8, 20}, 0};
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
