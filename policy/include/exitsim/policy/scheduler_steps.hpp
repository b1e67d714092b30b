#pragma once

// Building blocks shared by the built-in schedulers and available to user-written ones: the
// block arithmetic of the paged KV cache, and the "run the running set, preempting newest first"
// step that every built-in uses. Each is pure and allocation-free beyond the capacity `out`
// already has.

#include <cstddef>
#include <cstdint>

#include "exitsim/policy/scheduler.hpp"

namespace exitsim::policy {

// Rows group `g` of `seq` holds once `tokens` more tokens have K/V there. Rows already written
// beyond computed_tokens belong to the first pending token (a depth-wise token in flight): it
// needs no second row there.
inline std::int64_t kv_rows_after(const SequenceView& seq, std::size_t g, std::int64_t tokens) {
  const std::int64_t offset = seq.kv_row_offset[g];
  const std::int64_t written_ahead = offset > 0 ? offset : 0;
  const std::int64_t more = tokens > written_ahead ? tokens - written_ahead : 0;
  const std::int64_t rows = seq.computed_tokens + offset + more;
  return rows > 0 ? rows : 0;
}

// Blocks `seq` holds (as its K/V manager reports its rows, SequenceView::kv_row_offset) once
// `tokens` more tokens have K/V at every instance: the most they can need, as a token's exit is
// not known before it runs; a row a depth-wise token in flight has written already is not
// counted twice. The executors set SequenceView::kv_blocks to kv_footprint(seq, 0).
inline std::int64_t kv_footprint(const SequenceView& seq, std::int64_t tokens, const KvView& kv) {
  std::int64_t blocks = 0;
  for (std::size_t g = 0; g < kv.groups.count; ++g)
    blocks += kv.groups.instances[g] * kv.blocks_for(kv_rows_after(seq, g, tokens));
  return blocks;
}

// Blocks `seq` must newly allocate to process `tokens` more of its pending tokens; 0 when the
// blocks it holds already cover them. A sequence whose exited tokens kept no K/V somewhere
// (skip_kv) needs blocks only where its rows fill a block, not for the K/V it never stored.
// (Inline: the simulator asks it per sequence per step.)
inline std::int64_t blocks_to_grow(const SequenceView& seq, std::int64_t tokens, const KvView& kv) {
  const std::int64_t grown = kv_footprint(seq, tokens, kv) - seq.kv_blocks;
  return grown > 0 ? grown : 0;
}

// The most of `seq`'s pending tokens that its held blocks plus `spare_blocks` more can hold
// (negative `spare_blocks` counts as none).
std::int64_t tokens_within_blocks(const SequenceView& seq, std::int64_t spare_blocks,
                                  const KvView& kv);

// Free blocks an admission keeps back: `fraction` of the total, rounded down. Admitting up to
// the last free block would make the next decode step preempt at once.
std::int64_t watermark_blocks(const KvView& kv, double fraction);

// Clears the preemptions of a decision that schedules no work: an executor starts no iteration
// for it, so they would never be applied (check_decision refuses such a decision). Memory short
// with every running sequence parked in a depth-wise head queue gives one; the executors then
// release a waiting K/V holder instead (waiting_kv_holder_to_release).
void drop_idle_preemptions(SchedulerDecision& decision);

// The fraction of all blocks the built-in whole-prompt admissions keep back (vLLM's default).
inline constexpr double k_default_watermark_fraction = 0.01;

// Whether this is a steady decode step: nobody waits, every running sequence is decoding and
// holds a slot in the batch, and the token budget and the free blocks cover one more token for
// each. A scheduler whose decodes_all_when_steady() is true then decides one decode token for
// each running sequence and nothing else. `growth`, when given (one entry per running sequence),
// receives each one's blocks_to_grow(seq, 1), so an executor need not work them out again.
bool steady_decode(const SchedulerSnapshot& snapshot, std::span<std::int64_t> growth = {});

// Which running sequences schedule_running() gives work to.
enum class RunningWork : std::uint8_t {
  all_pending,  // every running sequence, all its pending tokens (1 for a decode step)
  decodes,      // only decoding sequences, one token each
};

// What schedule_running() left for the phases that follow it.
struct RunningPhase {
  std::int64_t tokens = 0;        // tokens scheduled
  std::int64_t spare_blocks = 0;  // free blocks left, counting those freed by preemption
  std::size_t kept = 0;           // running[0, kept) stay; running[kept, end) were preempted
};

// Gives the running set its work in admission order, skipping sequences whose tokens no longer
// fit the token budget. When the blocks for that work do not fit, preempts by recompute,
// newest-admitted first (any running sequence, with work or without), until they do; a victim's
// work is dropped. Victims are listed in `out.preempt` oldest first, so they return to the front
// of the waiting queue in admission order. Call it first, on a cleared decision.
RunningPhase schedule_running(const SchedulerSnapshot& snapshot, RunningWork which,
                              SchedulerDecision& out);

// What an admission phase may still fill: slots in the block, the token budget, K/V blocks.
struct AdmissionRoom {
  std::int64_t occupants = 0;    // sequences holding a slot in the block (block_occupants)
  std::int64_t tokens = 0;       // tokens this iteration's work already processes
  std::int64_t free_blocks = 0;  // free blocks not yet promised to this iteration's work
  std::int64_t watermark = 0;    // of those, kept back from admission (watermark_blocks)
};

// Whether a waiting sequence may be admitted past one ahead of it whose blocks do not fit yet: a
// sequence back from the head queue (SequenceView::returned_from_head). It holds its K/V and needs
// at most a block more, and it frees its blocks only by running to its end: were it held back
// too, the queue's head would wait for memory only the sequences behind it can free.
inline bool passes_when_short_of_blocks(const SequenceView& seq) {
  return seq.returned_from_head;
}

// Admits waiting sequences in queue order with all their pending tokens (whole prompts), while
// the block's occupants stay within max_running, the tokens within max_batched_tokens and the
// new blocks within the room's free blocks minus its watermark; the first that does not fit
// stops admission, so a long prompt is never overtaken forever by shorter ones behind it. A
// sequence back from the head queue is admitted by the same checks, in its place in the queue;
// only where the first that does not fit lacks blocks alone do those behind it still go
// (passes_when_short_of_blocks). Returns the tokens admitted.
std::int64_t admit_whole_prompts(const SchedulerSnapshot& snapshot, AdmissionRoom room,
                                 SchedulerDecision& out);

// The same from an empty iteration: the running set's occupants and every free block.
std::int64_t admit_whole_prompts(const SchedulerSnapshot& snapshot, std::int64_t watermark,
                                 SchedulerDecision& out);

// Whether `decision` admits a sequence with a prompt (or a recompute) to run, as opposed to only
// sequences back from the head queue, whose pending token is a decode.
bool admits_prompt(const SchedulerSnapshot& snapshot, const SchedulerDecision& decision);

// Whether a sequence may be admitted to an empty running set whatever the token budget and the
// watermark: only its blocks must fit. Without this, a prompt longer than max_batched_tokens, or
// a preempted sequence whose recompute (prompt plus outputs so far) has outgrown the budget,
// would wait forever; instead it runs alone, as the one sequence of its iteration.
bool admits_alone(const SchedulerSnapshot& snapshot, std::int64_t running, std::int64_t blocks);

}  // namespace exitsim::policy
