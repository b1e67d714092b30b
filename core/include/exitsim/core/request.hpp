#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "exitsim/core/ids.hpp"
#include "exitsim/core/time.hpp"

namespace exitsim {

// Request lengths above this are refused wherever they enter (traces, synthetic workloads): no
// model has such a context, and the limit keeps every later sum of a few lengths (input plus
// output, a batch's tokens) far from int64 overflow.
inline constexpr std::int64_t k_max_request_tokens = std::int64_t{1} << 31;

// One inference request as a workload describes it: when it arrives and how long it is.
struct RequestDescriptor {
  RequestId id;
  // Relative to the first request of its trace. Absent for length-only traces (Vidur/Metron),
  // whose arrivals come from the scenario's arrival process.
  std::optional<TimeNs> arrival;
  std::int64_t input_tokens = 0;
  std::int64_t output_tokens = 0;
  // The prompt's prefix as the trace names it, for prefix caching: one hash per block of
  // `prefix_block_tokens` tokens from the prompt's start, equal for two requests where their
  // blocks hold the same tokens (Mooncake's hash_ids: 512-token blocks). Empty: unknown.
  std::vector<std::uint64_t> prefix_hashes{};
  std::int64_t prefix_block_tokens = 0;

  friend bool operator==(const RequestDescriptor&, const RequestDescriptor&) = default;
};

}  // namespace exitsim
