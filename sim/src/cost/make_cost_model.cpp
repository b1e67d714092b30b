#include "exitsim/sim/cost/make_cost_model.hpp"

#include <fmt/format.h>

#include "exitsim/core/error.hpp"
#include "exitsim/sim/cost/roofline.hpp"

namespace exitsim::sim {

std::unique_ptr<CostModel> make_cost_model(const scenario::CostModelConfig& config,
                                           const ModelShape& model, const HardwareSpec& hardware) {
  if (config.kind == "roofline") {
    return std::make_unique<RooflineCostModel>(
        model, hardware, RooflineEfficiency{config.flops_efficiency, config.bandwidth_efficiency});
  }
  if (config.kind == "calibrated" || config.kind == "table") {
    // No silent fallback to roofline: the user asked for measured costs and would not get them.
    throw InputError({"", 0, 0, "cost_model.kind"},
                     fmt::format("'{}' needs a cost profile fitted from op traces, which a later "
                                 "release reads; use 'roofline' for now",
                                 config.kind));
  }
  throw InputError({"", 0, 0, "cost_model.kind"},
                   expected_found("one of roofline, calibrated, table", "'" + config.kind + "'"));
}

}  // namespace exitsim::sim
