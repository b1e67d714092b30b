// A trace's steps: which ranges they are, what their annotation says about the batch, whether
// they captured or replayed CUDA graphs, and when their GPU work ended.
#include "kineto_steps.hpp"

#include <algorithm>

#include "kineto_ops.hpp"

namespace exitsim::analysis::kineto {
namespace {

bool holds(const Range& outer, const Range& inner) {
  return &outer != &inner && outer.start_us <= inner.start_us && inner.end_us <= outer.end_us;
}

// The framework's step ranges; where one holds another (SGLang's step[...] inside its harness's
// execute_... range), the innermost, whose time is the forward's.
std::vector<Range> framework_steps(const Trace& trace) {
  std::vector<const Range*> candidates;
  for (const Range& r : trace.ranges) {
    if (step_range_kind(r.name) != StepRange::none)
      candidates.push_back(&r);
  }
  std::vector<Range> out;
  for (const Range* r : candidates) {
    const bool outer = std::any_of(candidates.begin(), candidates.end(),
                                   [&](const Range* other) { return holds(*r, *other); });
    if (!outer)
      out.push_back(*r);
  }
  return out;
}

// Without step ranges: from one embedding to the next.
std::vector<Range> embedding_steps(const Trace& trace) {
  std::vector<double> starts;
  for (const Operator& op : trace.operators) {
    if (op.name == "aten::embedding")
      starts.push_back(op.start_us);
  }
  std::vector<Range> out;
  for (std::size_t i = 0; i < starts.size(); ++i) {
    const double end = i + 1 < starts.size() ? starts[i + 1]
                                             : trace.operators.back().start_us +
                                                   trace.operators.back().duration_us + 1;
    out.push_back({"embedding", starts[i], end});
  }
  return out;
}

// A step annotation (vLLM's, SGLang's) overlapping [start, end) says how many prefills and decodes
// it ran.
StepHints hints_for(const Trace& trace, double start, double end) {
  for (const Range& r : trace.ranges) {
    if (r.start_us < end && start < r.end_us) {
      if (const std::optional<StepRequests> requests = step_requests(r.name))
        return {requests};
    }
  }
  return {};
}

std::string framework_source(StepRange kind) {
  switch (kind) {
    case StepRange::vllm:
      return "vLLM's execute_context_<n>(...)_generation_<m>(...) ranges";
    case StepRange::sglang:
      return "SGLang's step[...] ranges";
    case StepRange::capture:
      return "capture_<tokens>_<mode> ranges (CUDA-graph captures)";
    case StepRange::none:
      break;
  }
  return "";
}

}  // namespace

StepBounds step_bounds(const Trace& trace) {
  StepBounds out;
  std::vector<Range> ranges = trace.steps;
  out.source = "ProfilerStep#N ranges";
  if (ranges.empty()) {
    ranges = framework_steps(trace);
    if (!ranges.empty())
      out.source = framework_source(step_range_kind(ranges.front().name));
  }
  if (ranges.empty()) {
    ranges = embedding_steps(trace);
    out.source = "no step ranges: from one aten::embedding to the next";
  }
  for (const Range& r : ranges) {
    StepBound step{r.name,   r.start_us,
                   r.end_us, r.end_us,
                   false,    step_range_kind(r.name) == StepRange::capture,
                   {},       hints_for(trace, r.start_us, r.end_us)};
    // Half-open [start, end): what a step's CPU range launched. A GPU runs behind the CPU (an
    // engine that does not wait for its kernels), so the step lasts until its last one ended.
    const auto launched = [&](double t) { return r.start_us <= t && t < r.end_us; };
    auto k = std::lower_bound(trace.kernel_spans.begin(), trace.kernel_spans.end(), r.start_us,
                              [](const KernelSpan& span, double t) { return span.launch_us < t; });
    for (; k != trace.kernel_spans.end() && k->launch_us < r.end_us; ++k) {
      if (k->end_us > step.end_us) {
        step.end_us = k->end_us;
        step.gpu_ran_past = true;
      }
    }
    step.capture =
        step.capture || std::any_of(trace.captures_us.begin(), trace.captures_us.end(), launched);
    for (const GraphReplay& g : trace.replays) {
      if (launched(g.launch_us))
        step.replays.push_back(&g);
    }
    out.steps.push_back(std::move(step));
  }
  return out;
}

}  // namespace exitsim::analysis::kineto
