#pragma once

#include <cstdint>
#include <optional>

#include "exitsim/core/ids.hpp"
#include "exitsim/core/time.hpp"

namespace exitsim {

// One inference request as a workload describes it: when it arrives and how long it is.
struct RequestDescriptor {
  RequestId id;
  // Relative to the first request of its trace. Absent for length-only traces (Vidur/Metron),
  // whose arrivals come from the scenario's arrival process.
  std::optional<TimeNs> arrival;
  std::int64_t input_tokens = 0;
  std::int64_t output_tokens = 0;

  friend bool operator==(const RequestDescriptor&, const RequestDescriptor&) = default;
};

}  // namespace exitsim
