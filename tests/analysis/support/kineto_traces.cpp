#include "kineto_traces.hpp"

#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <stdexcept>

#include "exitsim/core/presets.hpp"
#include "exitsim/sim/cost/calibrated_cost_model.hpp"

namespace exitsim::test_support {

nlohmann::json read_trace_json(const std::string& path) {
  gzFile file = gzopen(path.c_str(), "rb");  // reads plain files as they are
  if (file == nullptr)
    throw std::runtime_error("cannot open " + path);
  std::string text;
  char buffer[1 << 15];
  int n = 0;
  while ((n = gzread(file, buffer, sizeof buffer)) > 0)
    text.append(buffer, static_cast<std::size_t>(n));
  gzclose(file);
  return nlohmann::json::parse(text);
}

nlohmann::json without_steps(nlohmann::json trace, const std::set<int>& dropped) {
  nlohmann::json kept = nlohmann::json::array();
  for (nlohmann::json& e : trace["traceEvents"]) {
    const std::string name = e.value("name", "");
    constexpr std::string_view prefix = "ProfilerStep#";
    if (e.value("cat", "") == "user_annotation" && name.starts_with(prefix) &&
        dropped.contains(std::stoi(name.substr(prefix.size()))))
      continue;
    kept.push_back(std::move(e));
  }
  trace["traceEvents"] = std::move(kept);
  return trace;
}

ModelShape recorded_hf_shape(const nlohmann::json& steps) {
  const nlohmann::json& c = steps["config"];
  ModelShape shape;
  shape.name = steps["model"].get<std::string>();
  shape.d_model = c["hidden_size"];
  shape.n_heads = c["num_attention_heads"];
  shape.n_kv_heads = c["num_key_value_heads"];
  shape.head_dim = c["head_dim"];
  shape.ffn_dim = c["intermediate_size"];
  shape.vocab = c["vocab_size"];
  shape.mlp = MlpKind::gated;
  shape.depth = DepthStructure::plain(c["num_hidden_layers"].get<int>());
  // Qwen3's attention normalises each head's queries and keys (Qwen3Attention's q_norm, k_norm).
  shape.qk_norm = c.value("model_type", "") == "qwen3";
  if (c.contains("num_local_experts")) {
    shape.experts = c["num_local_experts"];
    shape.experts_per_token = c["num_experts_per_tok"];
  }
  return shape;
}

std::vector<sim::BatchEntry> recorded_batch(const nlohmann::json& step, const ModelShape& shape,
                                            bool emits_token) {
  const bool prefill = step["kind"] == "prefill";
  sim::BatchEntry entry;
  entry.query_tokens = prefill ? step["prompt_tokens"].get<std::int64_t>() : 1;
  entry.context_tokens = prefill ? 0 : step["context"].get<std::int64_t>();
  entry.depth = shape.depth.stacked_depth();
  entry.emits_token = emits_token;
  return std::vector<sim::BatchEntry>(step["batch"].get<std::size_t>(), entry);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 == 1 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

HeldOutPricing price_held_out_steps(const std::string& folder,
                                    const std::vector<std::string>& phases, const ModelShape& shape,
                                    bool emits, bool head_on_every_position) {
  TempDir dir;
  HeldOutPricing out;
  std::vector<std::string> paths;
  std::vector<nlohmann::json> kept_out;
  for (const std::string& phase : phases) {
    std::ifstream in(folder + phase + ".steps.json");
    const nlohmann::json steps = nlohmann::json::parse(in);
    std::set<int> dropped;
    for (std::size_t i = 0; i < steps["calibration"].size(); ++i) {
      if (i % 3 == 2) {
        dropped.insert(static_cast<int>(i) + 1);  // ProfilerStep#1 is the first step
        kept_out.push_back(steps["calibration"][i]);
      }
    }
    const nlohmann::json trace =
        without_steps(read_trace_json(folder + phase + ".kineto.json.gz"), dropped);
    paths.push_back(dir.write(phase + ".json", trace.dump()));
  }
  out.imported = analysis::calibrate_kineto(paths, {});
  sim::ParallelPricing pricing;
  pricing.hardware = *find_hardware_preset("h100-sxm");  // prices a base model's head only
  const sim::CalibratedCostModel priced(out.imported.profile, paths.front(), shape, pricing);
  for (const nlohmann::json& step : kept_out) {
    double predicted_ms =
        static_cast<double>(priced.iteration_cost(recorded_batch(step, shape, emits)).total) / 1e6;
    if (head_on_every_position && step["kind"] == "prefill") {
      const sim::OpFit* head = out.imported.profile.find("lm_head");
      const auto sequences = step["batch"].get<double>();
      const double rows = sequences * step["prompt_tokens"].get<double>();
      predicted_ms += (head->predict_us(rows, 0) - head->predict_us(sequences, 0)) / 1e3;
    }
    out.errors.push_back(std::abs(predicted_ms / step["profiled_ms"].get<double>() - 1));
  }
  out.median = median(out.errors);
  return out;
}

void report_held_out(const std::string& model, const HeldOutPricing& h) {
  std::string each;
  for (const double e : h.errors)
    each += (each.empty() ? "" : ", ") + std::to_string(static_cast<int>(std::lround(100 * e)));
  std::printf("%s: %zu held-out steps, median error %.1f%% (each: %s%%)\n", model.c_str(),
              h.errors.size(), 100 * h.median, each.c_str());
  ::testing::Test::RecordProperty("median_held_out_error", std::to_string(h.median));
}

nlohmann::json gpu_fixture() {
  return read_trace_json(std::string(EXITSIM_SOURCE_DIR) +
                         "/tests/analysis/data/kineto/gpu_plain.kineto.json.gz");
}

analysis::KinetoCalibration import_json(const TempDir& dir, const std::string& name,
                                        const nlohmann::json& trace) {
  const std::string path = dir.write(name, trace.dump());
  return analysis::calibrate_kineto(std::vector<std::string>{path}, {});
}

std::int64_t steps_mapped(const analysis::KinetoCalibration& imported) {
  const sim::OpFit* embed = imported.profile.find("embed");
  return embed == nullptr ? 0 : embed->samples + embed->held_out;
}

}  // namespace exitsim::test_support
