#pragma once
// From a Kineto trace's top-level operators to the calibrated cost model's ops: steps, layers,
// the ops of each layer, their batch tokens and attention context, and the model's shape.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "exitsim/core/model_shape.hpp"
#include "kineto_events.hpp"
#include "parts.hpp"

namespace exitsim::analysis::kineto {

// What the import mapped and what it could not, for the console and the profile's notes.
struct ImportReport {
  ModelShape shape;                // recovered from the shapes seen
  std::int64_t steps = 0;          // steps mapped
  std::int64_t skipped_steps = 0;  // steps without an embedding, a layer or an LM head
  std::int64_t prefill_steps = 0;
  // Top-level operators outside every mapped op (step set-up such as rotary tables and masks),
  // by name: calls and microseconds. Their time is in the step residual.
  std::map<std::string, std::pair<std::int64_t, double>> unmapped;
  double gap_us = 0;   // step time between operators (Python, the framework), in the residual
  double step_us = 0;  // all mapped steps' wall time
  double unattributed_gpu_us = 0;
  std::int64_t unattributed_kernels = 0;
  std::int64_t graph_kernels = 0;
};

// Maps one trace's steps into `samples` (layer ops of steps whose queries are more than one token
// per sequence filed as "<op>.prefill") and `steps`, and checks the model's shape against the
// shape recovered from earlier traces in `report` (empty name: none yet). Throws InputError
// naming the trace and the step where the structure cannot be read or the shape changes.
void map_trace(const Trace& trace, Samples& samples, std::vector<TraceStep>& steps,
               ImportReport& report);

}  // namespace exitsim::analysis::kineto
