#pragma once

// Continuous depth-wise batching (Relaxed Recursive Transformers, BRIEF.md "depthwise"): the
// shared block's weights are the same at every recursion, so one call of the block runs a mixed
// batch of in-flight tokens, each at its own recursion index. A token enters the block after the
// prelude, runs one recursion per step, and leaves it when it exits or finishes its last
// recursion; its sequence's next token enters at the step after its coda and head ran. The
// engine and the simulator both step their tokens with these functions.

#include <cstdint>
#include <span>

#include "exitsim/core/model_shape.hpp"

namespace exitsim::policy {

enum class ExitedTokens : std::uint8_t {
  immediate,   // a token that left the block runs the coda and the head in the same step
  accumulate,  // tokens that left wait until enough of them share one coda + head call
  // As accumulate, but a token that left waits in a head queue outside the block: its slot goes
  // to another sequence at once (SequenceView::in_head_queue), so the block stays full. Once its
  // head ran, the sequence rejoins the waiting queue at its back (MoR's loop re-queues exited
  // sequences behind the waiting ones) or at its front (DepthwiseRule::returns_ahead_of_waiting),
  // and its next token enters the block only when admitted, so the block never holds more than
  // max_running sequences.
  head_queue,
};

struct DepthwiseRule {
  ExitedTokens exited = ExitedTokens::immediate;
  std::int64_t accumulate_threshold = 1;  // accumulate, head_queue: waiting tokens that trigger
                                          // the head
  // head_queue: a sequence whose head ran rejoins the waiting queue at its front (behind only the
  // sequences that returned before it) rather than at its back (MoR's loop; requeue_returning).
  bool returns_ahead_of_waiting = false;

  // Whether a sequence whose token waits for the head gives up its slot in the block.
  bool parks_in_head_queue() const { return exited == ExitedTokens::head_queue; }
  // Whether a sequence whose head ran (and that goes on) leaves the running set for the waiting
  // queue, to be admitted again (policy::requeue_returning).
  bool requeues_after_head() const { return exited == ExitedTokens::head_queue; }
};

// One sequence's in-flight token.
struct DepthwiseStage {
  int recursions_done = 0;     // recursions of the shared block it has run (0: not entered yet)
  bool awaiting_head = false;  // left the block; its coda and head have not run yet

  // The recursion (1-based) it runs in the next block call, or 0 while it waits for the head.
  int next_recursion() const { return awaiting_head ? 0 : recursions_done + 1; }
  friend bool operator==(const DepthwiseStage&, const DepthwiseStage&) = default;
};

// A depth-wise step runs whole recursions of the shared block, so a token can only leave it at
// the end of one. Throws InputError (field model.depth.exit_points) naming the first exit point
// of `depth` that is not.
void check_depthwise_exit_points(const DepthStructure& depth);

// Completes one step after the block call. `stages` are the batch's tokens as they were before
// the call; those not awaiting the head ran one recursion, and `left_block[i]` (read only for
// them) says token i exited or finished its last recursion. Sets `runs_head[i]` for the tokens
// whose coda and head run in this step and resets their stage for the sequence's next token.
// Under `accumulate`, waiting tokens run the head once at least `accumulate_threshold` wait, or
// when no token is left in the block (nothing else could ever release them). Allocation-free.
void finish_depthwise_step(const DepthwiseRule& rule, std::span<DepthwiseStage> stages,
                           std::span<const std::uint8_t> left_block,
                           std::span<std::uint8_t> runs_head);

}  // namespace exitsim::policy
