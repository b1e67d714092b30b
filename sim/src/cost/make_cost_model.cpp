#include "exitsim/sim/cost/make_cost_model.hpp"

#include <fmt/format.h>

#include "exitsim/core/error.hpp"
#include "exitsim/sim/cost/calibrated_cost_model.hpp"
#include "exitsim/sim/cost/roofline.hpp"
#include "exitsim/sim/cost/table_cost_model.hpp"
#include "exitsim/sim/inputs/shared_inputs.hpp"

namespace exitsim::sim {

bool prices_exit_probes(const scenario::ExitPolicyConfig& policy) {
  return policy.kind == "confidence" || policy.kind == "adaptive_threshold";
}

std::unique_ptr<CostModel> make_cost_model(const scenario::CostModelConfig& config,
                                           const ModelShape& model, const HardwareSpec& hardware,
                                           ParallelSpec parallel, bool exit_probes) {
  if (config.kind == "roofline") {
    return std::make_unique<RooflineCostModel>(
        model, hardware, RooflineEfficiency{config.flops_efficiency, config.bandwidth_efficiency},
        parallel, exit_probes);
  }
  // A measured table or profile has one price for a layer: layers that differ (windows, dense
  // layers among mixtures) would all be priced as the one measured.
  if (model.has_layer_kinds() && (config.kind == "table" || config.kind == "calibrated")) {
    throw InputError(
        {"", 0, 0, "cost_model.kind"},
        expected_found(fmt::format("roofline for {}, whose layers differ (attention windows or "
                                   "dense layers among mixtures) where a measured {} prices "
                                   "every layer alike",
                                   model.name, config.kind == "table" ? "table" : "profile"),
                       config.kind));
  }
  // A measured model prices one GPU's shard of each op at the scenario's TP; the collectives,
  // hand-offs and logits gather it did not measure come from a roofline of the scenario's
  // hardware, at the roofline's default efficiencies (a scenario sets them for kind roofline
  // only).
  const RooflineEfficiency defaults;
  const ParallelPricing pricing{
      parallel, hardware,
      RooflineEfficiency{
          config.flops_efficiency > 0 ? config.flops_efficiency : defaults.flops,
          config.bandwidth_efficiency > 0 ? config.bandwidth_efficiency : defaults.bandwidth}};
  if (config.kind == "table") {
    if (config.profile.empty()) {
      throw InputError({"", 0, 0, "cost_model.profile"},
                       expected_found("the path of a cost table", "none"));
    }
    return std::make_unique<TableCostModel>(*shared_cost_table(config.profile), model, pricing);
  }
  if (config.kind == "calibrated") {
    if (config.profile.empty()) {
      throw InputError({"", 0, 0, "cost_model.profile"},
                       expected_found("the path of a cost profile (exitsim calibrate)", "none"));
    }
    std::shared_ptr<const CostProfile> profile = shared_cost_profile(config.profile);
    // A profile prices the machine it was measured on: another accelerator would be priced
    // silently wrong.
    if (profile->source.hardware != hardware.name) {
      throw InputError({config.profile, 0, 0, "hardware.name"},
                       expected_found("the hardware the profile was measured on (\"" +
                                          profile->source.hardware + "\")",
                                      "\"" + hardware.name + "\""));
    }
    return std::make_unique<CalibratedCostModel>(std::move(profile), config.profile, model,
                                                 pricing);
  }
  throw InputError({"", 0, 0, "cost_model.kind"},
                   expected_found("one of roofline, calibrated, table", "'" + config.kind + "'"));
}

}  // namespace exitsim::sim
