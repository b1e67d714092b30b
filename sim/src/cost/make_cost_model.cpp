#include "exitsim/sim/cost/make_cost_model.hpp"

#include "exitsim/core/error.hpp"
#include "exitsim/sim/cost/roofline.hpp"
#include "exitsim/sim/cost/table_cost_model.hpp"

namespace exitsim::sim {

std::unique_ptr<CostModel> make_cost_model(const scenario::CostModelConfig& config,
                                           const ModelShape& model, const HardwareSpec& hardware) {
  if (config.kind == "roofline") {
    return std::make_unique<RooflineCostModel>(
        model, hardware, RooflineEfficiency{config.flops_efficiency, config.bandwidth_efficiency});
  }
  if (config.kind == "table") {
    if (config.profile.empty()) {
      throw InputError({"", 0, 0, "cost_model.profile"},
                       expected_found("the path of a cost table", "none"));
    }
    return std::make_unique<TableCostModel>(CostTable::read(config.profile), model);
  }
  if (config.kind == "calibrated") {
    // No silent fallback to roofline: the user asked for measured costs and would not get them.
    throw InputError({"", 0, 0, "cost_model.kind"},
                     "'calibrated' needs a cost profile fitted from op traces, which a later "
                     "release reads; use 'table' with measured per-op times, or 'roofline'");
  }
  throw InputError({"", 0, 0, "cost_model.kind"},
                   expected_found("one of roofline, calibrated, table", "'" + config.kind + "'"));
}

}  // namespace exitsim::sim
