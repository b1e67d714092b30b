#pragma once
// From a Kineto trace's steps to the calibrated cost model's samples: each mapped step's layer
// ops, embedding, LM head, sampling and all-reduces, and what the import could not map and why.

#include <array>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "exitsim/core/model_shape.hpp"
#include "kineto_events.hpp"
#include "kineto_layers.hpp"
#include "parts.hpp"

namespace exitsim::analysis::kineto {

// The steps skipped for one reason: how many, and the first one's culprit in words.
struct SkipTally {
  std::int64_t steps = 0;
  std::string first;    // "vllm::foo at op 12 of step 3"; empty: no operator to name
  std::string problem;  // the first one's own words, where the reason has them
};

// What the import mapped and what it could not, for the console and the profile's notes.
struct ImportReport {
  ModelShape shape;  // recovered from the shapes seen, per GPU
  std::int64_t steps = 0;
  std::int64_t prefill_steps = 0;
  std::int64_t headless_steps = 0;  // steps without an LM head (a base model)
  // Steps whose LM head ran on every position, not one row per sequence (LitGPT's GPT.forward):
  // how many, their wall time, and their head's time on the rows beyond one per sequence.
  std::int64_t every_position_head_steps = 0;
  double every_position_head_step_us = 0;
  double every_position_head_extra_us = 0;
  std::int64_t skipped_steps = 0;
  std::array<SkipTally, k_skip_kinds> skipped{};  // by Skip
  // Top-level operators outside every mapped op (step set-up such as rotary tables and masks),
  // by name: calls and microseconds. Their time is in the step residual.
  std::map<std::string, std::pair<std::int64_t, double>> unmapped;
  double gap_us = 0;   // step time between operators (Python, the framework), in the residual
  double step_us = 0;  // all mapped steps' wall time
  std::int64_t gpu_ran_past = 0;  // mapped steps whose kernels ended after their CPU range
  std::int64_t all_reduces = 0;   // tensor-parallel all-reduces mapped (tp_all_reduce)
  // Decode steps that ran as CUDA-graph replays, fitted whole as step.graph: steps by batch.
  std::map<std::int64_t, std::int64_t> graph_steps;
  int world_size = 1;                 // the largest distributedInfo.world_size of the traces
  std::set<std::string> assumptions;  // what the shapes did not say and was assumed
  std::string step_source;            // how the first trace's steps were found
  double unattributed_gpu_us = 0;
  std::int64_t unattributed_kernels = 0;
  std::int64_t graph_kernels = 0;
};

// Maps one trace's steps into `samples` (layer ops of steps whose queries are more than one token
// per sequence filed as "<op>.prefill") and `steps`, and checks the model's shape against the
// shape recovered from earlier traces in `report` (none yet: steps == 0). Throws InputError
// naming the trace and the step where the structure cannot be read or the shape changes.
void map_trace(const Trace& trace, Samples& samples, std::vector<TraceStep>& steps,
               ImportReport& report);

// "41 steps: 30 with no LM head, 11 with an unknown attention operator (first: vllm::foo at op
// 12 of step 3)": the skipped steps by reason.
std::string skipped_summary(const ImportReport& report);

}  // namespace exitsim::analysis::kineto
