#include "exitsim/sim/cost/cost_profile.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "exitsim/core/error.hpp"
#include "exitsim/core/version.hpp"
#include "exitsim/traces/atomic_output.hpp"
#include "exitsim/traces/json_document.hpp"

namespace exitsim::sim {

double OpFit::predict_us(double batch, double context) const {
  const Regime* regime = &regimes.back();
  for (const Regime& r : regimes) {
    if (batch <= static_cast<double>(r.batch_max)) {
      regime = &r;
      break;
    }
  }
  const auto& c = regime->coefficients;
  return std::max(0.0, c[0] + c[1] * batch + c[2] * context + c[3] * batch * context);
}

std::string model_fingerprint(const ModelShape& m) {
  const DepthStructure& d = m.depth;
  std::string lora = d.lora_rank.empty() ? "-" : fmt::format("{}", fmt::join(d.lora_rank, ","));
  std::string fingerprint = fmt::format(
      "d{} h{}/{}x{} ffn{} v{} {} depth {}+{}x{}+{} lora {}", m.d_model, m.n_heads, m.n_kv_heads,
      m.head_dim, m.ffn_dim, m.vocab, m.mlp == MlpKind::gated ? "gated" : "plain", d.prelude_layers,
      d.block_layers, d.recursions, d.coda_layers, lora);
  if (m.is_moe())
    fingerprint += fmt::format(" moe {}x{}", m.experts, m.experts_per_token);
  // What Hugging Face configs add, only when there (so that the engine's models keep their
  // fingerprints): a profile of another layer structure does not price this one.
  if (m.latent.enabled()) {
    fingerprint += fmt::format(" latent {}+{}/q{}/v{}", m.latent.kv_lora_rank,
                               m.latent.rope_head_dim, m.latent.q_lora_rank, m.latent.v_head_dim);
  }
  if (!m.windowed_layers.empty()) {
    fingerprint +=
        fmt::format(" {} {} on {}", m.window.kind == WindowKind::sliding ? "window" : "chunk",
                    m.window.tokens, fmt::join(m.windowed_layers, ""));
  }
  if (m.shared_experts > 0 || !m.dense_layers.empty()) {
    fingerprint += fmt::format(" shared {} dense {} on {}", m.shared_experts, m.dense_ffn_dim,
                               fmt::join(m.dense_layers, ""));
  }
  if (m.biases || m.learned_positions > 0 || m.norms_per_layer != 2 || m.qk_norm) {
    fingerprint +=
        fmt::format(" norms {}{}{} positions {}", m.norms_per_layer, m.qk_norm ? "+qk" : "",
                    m.biases ? " biases" : "", m.learned_positions);
  }
  return fingerprint;
}

const OpFit* CostProfile::find(const std::string& name) const {
  const auto it =
      std::lower_bound(ops.begin(), ops.end(), name,
                       [](const OpFit& op, const std::string& n) { return op.name < n; });
  return it != ops.end() && it->name == name ? &*it : nullptr;
}

namespace {

using nlohmann::json;

// Reads one profile, every failure an InputError naming the file and the key path.
class ProfileReader {
 public:
  explicit ProfileReader(std::string path) : path_(std::move(path)) {}

  [[noreturn]] void fail(const std::string& key, const std::string& expected,
                         const std::string& found) const {
    throw InputError({path_, 0, 0, key}, expected_found(expected, found));
  }

  const json& member(const json& object, const std::string& parent, const char* key) const {
    const std::string path = parent.empty() ? key : parent + "." + key;
    if (!object.is_object() || !object.contains(key))
      fail(path, "a value", "none");
    return object.at(key);
  }
  std::string text(const json& object, const std::string& parent, const char* key) const {
    const json& value = member(object, parent, key);
    if (!value.is_string())
      fail(parent + "." + key, "a string", value.dump());
    return value.get<std::string>();
  }
  double number(const json& object, const std::string& parent, const char* key) const {
    const json& value = member(object, parent, key);
    if (!value.is_number())
      fail(parent + "." + key, "a number", value.dump());
    return value.get<double>();
  }
  std::int64_t count(const json& object, const std::string& parent, const char* key) const {
    const json& value = member(object, parent, key);
    if (!value.is_number_integer() || value.get<std::int64_t>() < 0)
      fail(parent + "." + key, "a whole number >= 0", value.dump());
    return value.get<std::int64_t>();
  }

  std::vector<std::string> terms(const json& object, const std::string& at) const {
    const json& list = object.at("undetermined_terms");
    std::vector<std::string> out;
    const auto known = [](const json& t) {
      return t.is_string() && (t == "batch" || t == "context" || t == "batch x context");
    };
    if (!list.is_array() || !std::all_of(list.begin(), list.end(), known))
      fail(at, "a list of \"batch\", \"context\" or \"batch x context\"", list.dump());
    for (const json& t : list)
      out.push_back(t.get<std::string>());
    return out;
  }

  OpFit op(const json& value, const std::string& at) const {
    OpFit fit;
    fit.name = text(value, at, "name");
    fit.kind = text(value, at, "kind");
    fit.samples = count(value, at, "samples");
    fit.held_out = count(value, at, "held_out");
    fit.fit_mape = number(value, at, "fit_mape");
    fit.held_out_mape = number(value, at, "held_out_mape");
    fit.batch_min_seen = count(value, at, "batch_min_seen");
    fit.batch_max_seen = count(value, at, "batch_max_seen");
    // Written since the op grid; a profile without them reads as before.
    if (value.contains("held_out_median_ape"))
      fit.held_out_median_ape = number(value, at, "held_out_median_ape");
    if (value.contains("fit_median_ape"))
      fit.fit_median_ape = number(value, at, "fit_median_ape");
    if (value.contains("context_max_seen"))
      fit.context_max_seen = count(value, at, "context_max_seen");
    if (value.contains("measured_by")) {
      fit.measured_by = text(value, at, "measured_by");
      if (fit.measured_by != "trace" && fit.measured_by != "grid" && fit.measured_by != "roofline")
        fail(at + ".measured_by", "\"trace\", \"grid\" or \"roofline\"",
             "\"" + fit.measured_by + "\"");
    }
    if (value.contains("in_situ_scale"))
      fit.in_situ_scale = number(value, at, "in_situ_scale");
    if (value.contains("in_situ_median_ape"))
      fit.in_situ_median_ape = number(value, at, "in_situ_median_ape");
    if (value.contains("undetermined_terms"))
      fit.undetermined_terms = terms(value, at + ".undetermined_terms");
    const json& regimes = member(value, at, "regimes");
    if (!regimes.is_array() || regimes.empty())
      fail(at + ".regimes", "a non-empty list of regimes", regimes.dump());
    for (std::size_t i = 0; i < regimes.size(); ++i) {
      const std::string where = fmt::format("{}.regimes[{}]", at, i);
      OpFit::Regime regime;
      regime.batch_max = count(regimes[i], where, "batch_max");
      if (!fit.regimes.empty() && regime.batch_max <= fit.regimes.back().batch_max) {
        fail(where + ".batch_max",
             fmt::format("a batch above {} (regimes ascend)", fit.regimes.back().batch_max),
             std::to_string(regime.batch_max));
      }
      const json& c = member(regimes[i], where, "coefficients");
      if (!c.is_array() || c.size() != regime.coefficients.size() ||
          !std::all_of(c.begin(), c.end(), [](const json& x) { return x.is_number(); })) {
        fail(where + ".coefficients", "4 numbers (c0 + c1 B + c2 C + c3 B C, microseconds)",
             c.dump());
      }
      for (std::size_t k = 0; k < regime.coefficients.size(); ++k)
        regime.coefficients[k] = c[k].get<double>();
      if (regimes[i].contains("mean_of_calls")) {
        const json& mean = regimes[i]["mean_of_calls"];
        if (!mean.is_boolean())
          fail(where + ".mean_of_calls", "true or false", mean.dump());
        regime.mean_of_calls = mean.get<bool>();
      }
      fit.regimes.push_back(regime);
    }
    return fit;
  }

  CostProfile read() const {
    std::ifstream in(path_, std::ios::binary);
    if (!in)
      fail("cost_model.profile", "a readable cost profile", "a path that cannot be opened");
    const std::string content((std::istreambuf_iterator<char>(in)),
                              std::istreambuf_iterator<char>());
    const json root = traces::parse_json_document(content, path_, "a JSON cost profile");
    if (!root.is_object() || !root.contains("format") || root["format"] != CostProfile::k_format)
      fail("format", fmt::format("\"{}\"", CostProfile::k_format),
           root.is_object() && root.contains("format") ? root["format"].dump() : "none");
    CostProfile profile;
    const json& source = member(root, "", "source");
    profile.source.engine = text(source, "source", "engine");
    profile.source.backend = text(source, "source", "backend");
    profile.source.hardware = text(source, "source", "hardware");
    profile.source.model = text(source, "source", "model");
    profile.source.model_shape = text(source, "source", "model_shape");
    const json& traces = member(source, "source", "traces");
    if (!traces.is_array())
      fail("source.traces", "a list of paths", traces.dump());
    for (const json& t : traces)
      profile.source.traces.push_back(t.is_string() ? t.get<std::string>() : t.dump());
    if (source.contains("build"))
      profile.source.build = text(source, "source", "build");
    if (source.contains("speed_probe_us"))
      profile.source.speed_probe_us = number(source, "source", "speed_probe_us");
    // Written since profiles carry TP; older ones were measured on one device.
    if (source.contains("tensor_parallel")) {
      const json& tp = source["tensor_parallel"];
      if (!tp.is_number_integer() || tp.get<std::int64_t>() < 1 || tp.get<std::int64_t>() > 1024)
        fail("source.tensor_parallel", "a whole number from 1 to 1024", tp.dump());
      profile.source.tensor_parallel = tp.get<int>();
    }
    if (root.contains("step_variability")) {
      const json& q = root["step_variability"];
      if (!q.is_array() || q.size() != CostProfile::k_step_quantiles ||
          !std::all_of(q.begin(), q.end(),
                       [](const json& x) { return x.is_number() && x.get<double>() > 0; }) ||
          !std::is_sorted(q.begin(), q.end(), [](const json& a, const json& b) {
            return a.get<double>() < b.get<double>();
          })) {
        fail("step_variability",
             fmt::format("{} ascending ratios > 0 (quantiles 0, 5%, ..., 100%)",
                         CostProfile::k_step_quantiles),
             q.dump().substr(0, 80));
      }
      for (const json& x : q)
        profile.step_variability.push_back(x.get<double>());
    }
    if (root.contains("notes")) {
      const json& notes = root["notes"];
      if (!notes.is_array() ||
          !std::all_of(notes.begin(), notes.end(), [](const json& n) { return n.is_string(); }))
        fail("notes", "a list of lines (strings)", notes.dump().substr(0, 80));
      for (const json& n : notes)
        profile.notes.push_back(n.get<std::string>());
    }
    const json& ops = member(root, "", "ops");
    if (!ops.is_array() || ops.empty())
      fail("ops", "a non-empty list of fitted ops", ops.dump());
    for (std::size_t i = 0; i < ops.size(); ++i)
      profile.ops.push_back(op(ops[i], fmt::format("ops[{}]", i)));
    std::sort(profile.ops.begin(), profile.ops.end(),
              [](const OpFit& a, const OpFit& b) { return a.name < b.name; });
    for (std::size_t i = 1; i < profile.ops.size(); ++i) {
      if (profile.ops[i].name == profile.ops[i - 1].name)
        fail("ops", "each op once", "\"" + profile.ops[i].name + "\" twice");
    }
    return profile;
  }

 private:
  std::string path_;
};

}  // namespace

CostProfile CostProfile::read(const std::string& path) {
  return ProfileReader(path).read();
}

void CostProfile::write(const std::string& path) const {
  json root;
  root["format"] = k_format;
  root["source"] = {{"engine", source.engine},
                    {"backend", source.backend},
                    {"hardware", source.hardware},
                    {"model", source.model},
                    {"model_shape", source.model_shape},
                    {"traces", source.traces},
                    {"tensor_parallel", source.tensor_parallel}};
  if (source.speed_probe_us > 0)
    root["source"]["speed_probe_us"] = source.speed_probe_us;
  if (!source.build.empty())
    root["source"]["build"] = source.build;
  root["exitsim"] = {{"version", version()}, {"commit", commit()}};
  json list = json::array();
  for (const OpFit& op : ops) {
    json regimes = json::array();
    for (const OpFit::Regime& r : op.regimes) {
      json regime = {{"batch_max", r.batch_max}, {"coefficients", r.coefficients}};
      if (r.mean_of_calls)
        regime["mean_of_calls"] = true;
      regimes.push_back(std::move(regime));
    }
    json entry = {{"name", op.name},
                  {"kind", op.kind},
                  {"samples", op.samples},
                  {"held_out", op.held_out},
                  {"fit_mape", op.fit_mape},
                  {"held_out_mape", op.held_out_mape},
                  {"held_out_median_ape", op.held_out_median_ape},
                  {"fit_median_ape", op.fit_median_ape},
                  {"batch_min_seen", op.batch_min_seen},
                  {"batch_max_seen", op.batch_max_seen},
                  {"measured_by", op.measured_by},
                  {"in_situ_scale", op.in_situ_scale},
                  {"in_situ_median_ape", op.in_situ_median_ape},
                  {"regimes", regimes}};
    if (op.context_max_seen >= 0)
      entry["context_max_seen"] = op.context_max_seen;
    if (!op.undetermined_terms.empty())
      entry["undetermined_terms"] = op.undetermined_terms;
    list.push_back(std::move(entry));
  }
  root["ops"] = list;
  if (!step_variability.empty())
    root["step_variability"] = step_variability;
  if (!notes.empty())
    root["notes"] = notes;
  traces::write_file_atomically(path, root.dump(2) + "\n");
}

}  // namespace exitsim::sim
