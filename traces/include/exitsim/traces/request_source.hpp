#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "exitsim/core/request.hpp"

namespace exitsim::traces {

// A stream of requests in arrival order. Readers hold O(1) state so that memory does not grow
// with trace length; the simulator pulls one request at a time.
class RequestSource {
 public:
  virtual ~RequestSource() = default;

  // The next request, or nullopt at the end. Throws InputError on malformed input (unless the
  // source was opened to skip bad rows, in which case they are counted in skipped_rows()).
  virtual std::optional<RequestDescriptor> next() = 0;

  // Rows dropped so far and why (failed requests in BurstGPT, bad rows with --skip-bad-rows).
  virtual std::int64_t skipped_rows() const = 0;
  // Whether requests carry arrival times (false for length-only traces).
  virtual bool has_arrivals() const = 0;
  // Human-readable name of the format ("azure", "mooncake", ...).
  virtual std::string format_name() const = 0;
  // Whether any request may name prefix blocks (Mooncake's hash_ids, a native file with the
  // prefix columns), known before the first request, so a writer can lay out its columns.
  virtual bool may_carry_prefix_hashes() const { return false; }
  // What this source did that changes the workload the user described (a cap on a trace, rows
  // skipped, lengths clamped), one line each, for the run's warnings. Called once, after the
  // run pulled its last request; it may read the rest of the input to count what was left out.
  virtual std::vector<std::string> notes() { return {}; }
};

}  // namespace exitsim::traces
