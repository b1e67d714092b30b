#pragma once
// Where a trace's steps are: torch.profiler's ProfilerStep#N ranges, else the framework's own step
// ranges (vLLM's execute_context_..., SGLang's step[...], a graph capture's capture_...), else
// from one aten::embedding to the next; and on a GPU, until the step's last kernel ended.

#include <cstdint>
#include <string>
#include <vector>

#include "kineto_attention.hpp"
#include "kineto_events.hpp"

namespace exitsim::analysis::kineto {

struct StepBound {
  std::string name;  // the range's name ("embedding" between embeddings)
  double start_us = 0;
  double cpu_end_us = 0;      // the range's end: the operators it holds start before it
  double end_us = 0;          // the range's end, or its last kernel's where later
  bool gpu_ran_past = false;  // the step's kernels ended after its CPU range
  bool capture = false;       // a CUDA-graph capture, not a run
  std::vector<const GraphReplay*> replays;  // graph replays launched in the step
  StepHints hints;
};

struct StepBounds {
  std::vector<StepBound> steps;
  std::string source;  // how they were found, for the console and the notes
};

StepBounds step_bounds(const Trace& trace);

}  // namespace exitsim::analysis::kineto
