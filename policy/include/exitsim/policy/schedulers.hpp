#pragma once

// The built-in batching schedulers. Each is also registered by name (scheduler_registry.hpp);
// tests and executors may construct them directly. docs/schedulers.md describes each one.

#include <string_view>

#include "exitsim/policy/scheduler.hpp"
#include "exitsim/policy/scheduler_steps.hpp"

namespace exitsim::policy {

// `static`: a batch runs to completion before the next one forms. With nothing running, admits
// waiting sequences in queue order while the batch stays within max_running, their pending
// tokens within max_batched_tokens and their blocks within the free blocks, and prefills them
// all; otherwise never admits and runs every running sequence's pending tokens, preempting
// newest first when blocks run out.
class StaticBatching final : public Scheduler {
 public:
  std::string_view name() const override { return "static"; }
  bool decodes_all_when_steady() const override { return true; }
  void schedule(const SchedulerSnapshot& snapshot, SchedulerDecision& out) const override;
};

// `continuous`: iteration-level batching with whole-prompt prefills. Admits waiting sequences in
// queue order while the running set, the iteration's prefill tokens and the free blocks above
// the watermark allow; an iteration with any prefill is prefill-only. Otherwise every running
// sequence takes a decode step, preempting newest first when blocks run out.
class ContinuousBatching final : public Scheduler {
 public:
  struct Params {
    double watermark_fraction = k_default_watermark_fraction;  // of total blocks kept free
  };

  ContinuousBatching() = default;
  explicit ContinuousBatching(Params params) : params_(params) {}

  std::string_view name() const override { return "continuous"; }
  bool decodes_all_when_steady() const override { return true; }
  void schedule(const SchedulerSnapshot& snapshot, SchedulerDecision& out) const override;

 private:
  Params params_;
};

// `chunked_prefill`: decodes first, one token each (preempting newest first when blocks run
// out); the rest of the token budget goes to prefill chunks, first of running sequences still
// prefilling (admission order), then of newly admitted waiting sequences (queue order, only when
// nothing was preempted). A chunk is limited by the budget left and by the blocks available.
// With `reserve_prompt_blocks`, a waiting prompt is admitted only when the blocks of its whole
// prompt fit in the free blocks above the watermark minus the blocks the running prefills still
// need to finish theirs: admission then never starts more prefills than memory can finish, so
// long prompts do not preempt each other's partial prefills (vLLM admits on the whole prompt's
// blocks the same way).
class ChunkedPrefill final : public Scheduler {
 public:
  struct Params {
    double watermark_fraction = k_default_watermark_fraction;  // of total blocks kept free
    bool reserve_prompt_blocks = false;
  };

  ChunkedPrefill() = default;
  explicit ChunkedPrefill(Params params) : params_(params) {}

  std::string_view name() const override { return "chunked_prefill"; }
  bool chunks_prompts() const override { return true; }
  bool decodes_all_when_steady() const override { return true; }
  void schedule(const SchedulerSnapshot& snapshot, SchedulerDecision& out) const override;

 private:
  Params params_;
};

}  // namespace exitsim::policy
