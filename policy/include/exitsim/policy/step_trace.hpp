#pragma once

// What one iteration of an executor did, in the terms the engine and the simulator share: the
// scheduler's admissions and preemptions, and per sequence the work the synchronization plan
// gave it and the K/V it holds after. The simulator prices its iterations from these rows
// (sim::StepPricer), validation prices the engine's recorded rows the same way, and the
// conformance suite compares the two executors' traces step by step.

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "exitsim/core/ids.hpp"
#include "exitsim/core/time.hpp"
#include "exitsim/policy/kv_layout.hpp"
#include "exitsim/policy/sync_strategy.hpp"

namespace exitsim::policy {

enum class RowKind : std::uint8_t {
  prefill,    // a prompt (or recompute) chunk through every layer
  decode,     // one token through the stack as its DepthPlan says
  depthwise,  // one depth-wise step of a token: a recursion of the block, its head, or both
};

// One sequence's work in a step.
struct StepRow {
  RequestId request;
  RowKind kind = RowKind::prefill;
  std::int64_t query_tokens = 0;    // processed now (1 for a decode or depth-wise step)
  std::int64_t context_tokens = 0;  // tokens with K/V before the step
  bool emits = false;               // produces an output token this step
  // decode: what each layer runs (DepthPlan); prefill: run_depth = useful_depth = the stack.
  DepthPlan plan;
  // skip_kv and depthwise: rows the K/V groups held before the step (attention contexts per
  // recursion; group 0 is recursion 1), for recursion_contexts groups; 0 = every recursion
  // attends over context_tokens.
  std::uint8_t recursion_contexts = 0;
  std::array<std::int32_t, k_max_kv_groups> recursion_context{};
  // depthwise: the recursion (1-based) the token runs this step (0: none, it only ran its head)
  // and whether its coda and head run.
  int recursion = 0;
  bool runs_head = false;
  // The exit depth of the token emitted (emitting rows), in stack layers.
  int exit_depth = 0;
  std::int64_t kv_blocks_after = 0;  // K/V blocks the sequence holds after the step

  // Back to a default row, leaving the arrays' unused slots as they are (a reused row).
  void reset();
  // Contexts past recursion_contexts are unspecified and never compared.
  friend bool operator==(const StepRow& a, const StepRow& b);
};

struct StepTrace {
  std::uint64_t step = 0;  // 1-based, per replica
  TimeNs start = 0;
  TimeNs duration = 0;
  std::vector<RequestId> admitted;   // in the order the decision listed them
  std::vector<RequestId> preempted;  // likewise
  std::vector<StepRow> rows;         // in running-set order
  std::int64_t kv_blocks_used = 0;   // pool blocks held after the step
  // Swap preemption: pool blocks moved to host memory (this step's victims) and back (its
  // readmitted swapped sequences) before the step ran; the step waits for both transfers.
  std::int64_t swapped_out_blocks = 0;
  std::int64_t swapped_in_blocks = 0;

  friend bool operator==(const StepTrace&, const StepTrace&) = default;
};

// One line per field that matters, for a divergence report.
std::string describe(const StepTrace& step);

}  // namespace exitsim::policy
