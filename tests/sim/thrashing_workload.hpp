#pragma once
// A workload on which chunked_prefill thrashes (docs/schedulers.md): long prompts with K/V for
// about 8 of them, so prefills admitted on their first chunk's blocks preempt each other hundreds
// of times. The scenario overrides, shared by the tests of the thrash and of its remedy.

#include <string>
#include <vector>

namespace exitsim::sim::test_workloads {

inline const std::vector<std::string> k_chunked_prefill_thrashing = {
    "scheduler.kind=chunked_prefill",
    "scheduler.max_batched_tokens=2048",
    "scheduler.kv_blocks=2000",
    "workload.requests=80",
    "workload.arrivals.rate=8",
    "workload.input_tokens={dist: uniform, min: 2000, max: 6000}",
    "workload.output_tokens={dist: fixed, value: 200}"};

}  // namespace exitsim::sim::test_workloads
