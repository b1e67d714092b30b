#pragma once

// A one-regime op fit for hand-made cost profiles: c0 + per_token x batch over any batch.

#include <string>
#include <string_view>

#include "exitsim/sim/cost/cost_profile.hpp"
#include "exitsim/traces/engine_ops.hpp"

namespace exitsim::test_support {

inline sim::OpFit linear_fit(std::string_view name, double c0, double per_token,
                             std::string measured_by = "trace") {
  sim::OpFit fit;
  fit.name = std::string(name);
  fit.kind = name == traces::engine_ops::attention ? "attention" : "gemm";
  fit.regimes = {{1 << 20, {c0, per_token, 0, 0}}};
  fit.batch_min_seen = 1;
  fit.batch_max_seen = 1 << 20;
  fit.measured_by = std::move(measured_by);
  return fit;
}

}  // namespace exitsim::test_support
