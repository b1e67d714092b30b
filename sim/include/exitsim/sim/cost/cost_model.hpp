#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "exitsim/core/time.hpp"

namespace exitsim::sim {

// One sequence's share of an iteration, as the cost model prices it.
struct BatchEntry {
  std::int64_t query_tokens = 0;    // tokens processed now (1 for decode, a chunk for prefill)
  std::int64_t context_tokens = 0;  // tokens already in K/V before this iteration
  // Layers of the unrolled stack these tokens run (dynamic depth; the full depth for static
  // models). The coda layers and the final norm run for every token whatever its depth (later
  // tokens attend over the coda's K/V); the LM head and sampling only for entries that emit.
  int depth = 0;
  bool emits_token = false;  // whether this entry's last token produces an output token
};

// Time of each part of one iteration (the critical path and what lies on it), for metrics and
// timelines.
struct IterationCost {
  TimeNs total = 0;          // critical path of the iteration's op graph
  TimeNs compute_bound = 0;  // part of `total` spent in ops limited by FLOP/s
  TimeNs memory_bound = 0;   // part limited by memory bandwidth
  TimeNs overhead = 0;       // kernel-launch overhead on the critical path
  double flops = 0;          // executed FLOPs (all ops)
  double bytes = 0;          // bytes moved (all ops)
};

// Prices one iteration of a replica. Implementations: roofline (from hardware and model specs)
// and, later, calibrated (from op traces). The simulator calls this once per iteration, so
// implementations precompute everything that does not depend on the batch.
class CostModel {
 public:
  virtual ~CostModel() = default;
  virtual std::string name() const = 0;
  virtual IterationCost iteration_cost(std::span<const BatchEntry> batch) const = 0;
};

}  // namespace exitsim::sim
