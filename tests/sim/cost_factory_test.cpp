#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "exitsim/core/error.hpp"
#include "exitsim/core/presets.hpp"
#include "exitsim/sim/cost/cost_profile.hpp"
#include "exitsim/sim/cost/make_cost_model.hpp"
#include "exitsim/sim/cost/roofline.hpp"
#include "exitsim/sim/cost/table_cost_model.hpp"

namespace exitsim::sim {
namespace {

scenario::CostModelConfig roofline_config() {
  scenario::CostModelConfig c;
  c.kind = "roofline";
  c.flops_efficiency = 0.7;
  c.bandwidth_efficiency = 0.85;
  return c;
}

std::string field_of_error(const scenario::CostModelConfig& config, const ModelShape& model,
                           const HardwareSpec& hardware, std::string* message = nullptr) {
  try {
    make_cost_model(config, model, hardware);
  } catch (const InputError& e) {
    if (message != nullptr)
      *message = e.message();
    return e.where().field;
  }
  return "<no error>";
}

TEST(CostFactory, RooflineKindBuildsTheRooflineModel) {
  const auto m = make_cost_model(roofline_config(), *find_model_preset("llama-3-8b"),
                                 *find_hardware_preset("h100-sxm"));
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->name(), "roofline");
  EXPECT_NE(dynamic_cast<const RooflineCostModel*>(m.get()), nullptr);
}

TEST(CostFactory, CalibratedKindNeedsAProfileOfThisHardware) {
  scenario::CostModelConfig c = roofline_config();
  c.kind = "calibrated";
  std::string message;
  EXPECT_EQ(field_of_error(c, *find_model_preset("llama-3-8b"), *find_hardware_preset("h100-sxm"),
                           &message),
            "cost_model.profile");
  EXPECT_NE(message.find("cost profile"), std::string::npos);

  const ModelShape model = *find_model_preset("llama-3-8b");
  sim::CostProfile profile;
  profile.source = {"exitsim-engine",         "cpu",           "some cpu x 2 threads", model.name,
                    model_fingerprint(model), {"op_trace.csv"}};
  profile.ops.push_back({"attention", "attention", {{1, {1, 0, 0, 0}}}, 1, 0, 0, 0, 1, 1});
  const std::filesystem::path path =
      std::filesystem::path(testing::TempDir()) / "cost_factory_profile.json";
  profile.write(path.string());
  c.profile = path.string();
  EXPECT_EQ(field_of_error(c, model, *find_hardware_preset("h100-sxm"), &message), "hardware.name");
  EXPECT_NE(message.find("some cpu x 2 threads"), std::string::npos) << message;
}

TEST(CostFactory, TableKindReadsTheProfile) {
  const std::filesystem::path path =
      std::filesystem::path(testing::TempDir()) / "cost_factory_table.csv";
  std::ofstream(path) << "# exitsim-cost-table v1\nop,batch,time_us\nlayer,1,100\n"
                         "lm_head,1,50\nembedding,1,5\n";
  scenario::CostModelConfig c = roofline_config();
  c.kind = "table";
  c.profile = path.string();
  const auto m =
      make_cost_model(c, *find_model_preset("llama-3-8b"), *find_hardware_preset("h100-sxm"));
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->name(), "table");
  EXPECT_NE(dynamic_cast<const TableCostModel*>(m.get()), nullptr);
  std::filesystem::remove(path);
}

TEST(CostFactory, TableKindNamesAMissingOrUnreadableProfile) {
  scenario::CostModelConfig c = roofline_config();
  c.kind = "table";
  c.profile = "";
  const ModelShape model = *find_model_preset("llama-3-8b");
  const HardwareSpec hw = *find_hardware_preset("h100-sxm");
  EXPECT_EQ(field_of_error(c, model, hw), "cost_model.profile");
  c.profile = "/nonexistent/exitsim/costs.csv";
  std::string message;
  EXPECT_EQ(field_of_error(c, model, hw, &message), "cost_model.profile");
  EXPECT_NE(message.find("cannot be opened"), std::string::npos);
}

TEST(CostFactory, EfficienciesMustBeFractions) {
  const ModelShape model = *find_model_preset("smollm-135m");
  const HardwareSpec hw = *find_hardware_preset("l40s");
  scenario::CostModelConfig c = roofline_config();
  c.flops_efficiency = 0;
  EXPECT_EQ(field_of_error(c, model, hw), "cost_model.flops_efficiency");
  c.flops_efficiency = 1;
  EXPECT_EQ(field_of_error(c, model, hw), "<no error>");
  c.bandwidth_efficiency = 1.5;
  EXPECT_EQ(field_of_error(c, model, hw), "cost_model.bandwidth_efficiency");
}

TEST(CostFactory, HardwareWithoutAPeakForTheDtypeIsNamed) {
  ModelShape model = *find_model_preset("llama-3-8b");
  model.dtype = DType::fp8;
  std::string message;
  EXPECT_EQ(field_of_error(roofline_config(), model, *find_hardware_preset("a100-80gb"), &message),
            "hardware.peak_tflops.fp8");
  EXPECT_NE(message.find("a100-80gb"), std::string::npos);
  EXPECT_NE(message.find("fp8"), std::string::npos);

  HardwareSpec no_bandwidth = *find_hardware_preset("h100-sxm");
  no_bandwidth.memory_bandwidth = 0;
  EXPECT_EQ(field_of_error(roofline_config(), *find_model_preset("llama-3-8b"), no_bandwidth),
            "hardware.memory_bandwidth_gbps");
}

TEST(CostFactory, InconsistentModelShapeIsNamed) {
  ModelShape model = *find_model_preset("llama-3-8b");
  model.n_kv_heads = 5;  // 32 heads are not a multiple of 5
  EXPECT_EQ(field_of_error(roofline_config(), model, *find_hardware_preset("h100-sxm"))
                .rfind("model.", 0),
            0u);
}

}  // namespace
}  // namespace exitsim::sim
