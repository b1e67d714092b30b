#include "exitsim/policy/step_trace.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace exitsim::policy {
namespace {

std::string ids(const std::vector<RequestId>& list) {
  std::string text;
  for (const RequestId id : list)
    text += fmt::format("{}{}", text.empty() ? "" : " ", id.value);
  return text.empty() ? "-" : text;
}

std::string_view kind_name(RowKind kind) {
  switch (kind) {
    case RowKind::prefill:
      return "prefill";
    case RowKind::decode:
      return "decode";
    case RowKind::depthwise:
      return "depthwise";
  }
  return "?";
}

}  // namespace

void StepRow::reset() {
  request = RequestId{};
  kind = RowKind::prefill;
  query_tokens = 0;
  context_tokens = 0;
  emits = false;
  plan.run_depth = 0;
  plan.useful_depth = 0;
  plan.kv_only_to = 0;
  plan.fill_count = 0;
  plan.fills_complete = false;
  plan.exit_state_waits = false;
  recursion_contexts = 0;
  recursion = 0;
  runs_head = false;
  exit_depth = 0;
  kv_blocks_after = 0;
}

bool operator==(const StepRow& a, const StepRow& b) {
  return a.request == b.request && a.kind == b.kind && a.query_tokens == b.query_tokens &&
         a.context_tokens == b.context_tokens && a.emits == b.emits && a.plan == b.plan &&
         a.recursion_contexts == b.recursion_contexts &&
         std::equal(a.recursion_context.begin(), a.recursion_context.begin() + a.recursion_contexts,
                    b.recursion_context.begin()) &&
         a.recursion == b.recursion && a.runs_head == b.runs_head && a.exit_depth == b.exit_depth &&
         a.kv_blocks_after == b.kv_blocks_after;
}

std::string describe(const StepTrace& step) {
  std::string text = fmt::format(
      "step {} at {} ns for {} ns: admitted {}, preempted {}, {} K/V blocks held, swapped {} "
      "out and {} in\n",
      step.step, step.start, step.duration, ids(step.admitted), ids(step.preempted),
      step.kv_blocks_used, step.swapped_out_blocks, step.swapped_in_blocks);
  for (const StepRow& r : step.rows) {
    std::string fills;
    for (std::size_t g = 0; g < r.plan.fill_count; ++g)
      fills += fmt::format(" {}@{}", r.plan.fills[g].tokens, r.plan.fills[g].depth);
    std::string contexts;
    for (std::size_t g = 0; g < r.recursion_contexts; ++g)
      contexts += fmt::format(" {}", r.recursion_context[g]);
    text += fmt::format(
        "  request {} {} {}x{} emits {} exit {} run {} useful {} kv_only {} fills[{}]{}{} "
        "contexts[{}] recursion {} head {} blocks {}\n",
        r.request.value, kind_name(r.kind), r.query_tokens, r.context_tokens, r.emits, r.exit_depth,
        r.plan.run_depth, r.plan.useful_depth, r.plan.kv_only_to, fills,
        r.plan.fills_complete ? " complete" : "", r.plan.exit_state_waits ? " waits" : "", contexts,
        r.recursion, r.runs_head, r.kv_blocks_after);
  }
  return text;
}

}  // namespace exitsim::policy
