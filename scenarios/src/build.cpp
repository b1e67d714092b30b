// Pass 2: the Scenario from validated values, then the checks that involve several keys.
#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <numeric>
#include <system_error>

#include "embedded.hpp"
#include "exitsim/core/hf_config.hpp"
#include "exitsim/core/model_validation.hpp"
#include "exitsim/core/parallel.hpp"
#include "exitsim/core/presets.hpp"
#include "exitsim/core/suggest.hpp"
#include "groups.hpp"
#include "resolve.hpp"
#include "values.hpp"

namespace exitsim::scenario::detail {
namespace {

[[noreturn]] void fail_at(SourceLocation where, const std::string& field,
                          const std::string& message) {
  where.field = field;
  throw InputError(std::move(where), message);
}

[[noreturn]] void fail_key(const Resolution& r, const std::string& key,
                           const std::string& message) {
  throw InputError(r.where(key), message);
}

bool is_recursive_only(const std::string& name) {
  return name == "router_expert_choice" || name == "router_token_choice" || name == "depthwise" ||
         name == "skip_kv" || name == "shared_kv";
}

void check_model(const Scenario& s, const Resolution& r) {
  if (const auto problem = find_shape_problem(s.model.shape)) {
    fail_key(r, "model." + problem->field, problem->message);
  }
  const DType dtype = s.model.shape.dtype;
  if (s.hardware.spec.peak_flops_for(dtype) <= 0) {
    fail_key(r, fmt::format("hardware.peak_tflops.{}", to_string(dtype)),
             expected_found(
                 fmt::format("a positive peak for the model's dtype {}", to_string(dtype)), "0"));
  }
  if (const auto problem = find_parallel_problem(s.model.shape, s.parallel, s.hardware.spec)) {
    fail_key(r, "parallel." + problem->field, problem->message);
  }
  if (const auto problem = find_link_problem(s.parallel, s.hardware.spec)) {
    fail_key(r, problem->field, problem->message);
  }
}

void check_length(const LengthConfig& length, const Resolution& r, const std::string& section) {
  if (length.dist == "uniform" && (length.max == 0 || length.max < length.min)) {
    fail_key(
        r, section + ".max",
        expected_found(fmt::format("a maximum >= min ({}) for a uniform distribution", length.min),
                       fmt::format("{}", length.max)));
  }
  if ((length.dist == "lognormal" || length.dist == "empirical") && length.max != 0 &&
      length.max < length.min) {
    fail_key(r, section + ".max",
             expected_found(fmt::format("0 (no clamp) or a maximum >= min ({})", length.min),
                            fmt::format("{}", length.max)));
  }
}

// An empirical distribution replays measured lengths: it is clamped only to bounds the user
// gives, never to the synthetic defaults, which would silently change the trace's lengths.
void unclamp_empirical(LengthConfig& length, const Resolution& r, const std::string& section) {
  if (length.dist != "empirical")
    return;
  // The embedded default scenario spells out the synthetic defaults; they are not the user's.
  const auto given = [&](const char* key) {
    const Resolved* value = r.get(section + "." + key);
    return value != nullptr && value->given && value->loc.file != embedded::k_default_scenario_name;
  };
  if (!given("min"))
    length.min = 1;
  if (!given("max"))
    length.max = 0;
}

void check_workload(const Scenario& s, const Resolution& r) {
  const WorkloadConfig& w = s.workload;
  if (w.source == "synthetic") {
    if (w.requests < 1) {
      fail_key(r, "workload.requests",
               expected_found("an integer >= 1 for a synthetic workload", "0"));
    }
    check_length(w.input_tokens, r, "workload.input_tokens");
    check_length(w.output_tokens, r, "workload.output_tokens");
  }
}

void check_probabilities(const std::vector<double>& p, std::size_t exit_points,
                         const SourceLocation& where, const std::string& field) {
  if (p.size() != exit_points) {
    fail_at(where, field,
            expected_found(fmt::format("one probability per exit point ({})", exit_points),
                           fmt::format("{}", p.size())));
  }
  const double sum = std::accumulate(p.begin(), p.end(), 0.0);
  if (std::abs(sum - 1.0) > 1e-6) {
    fail_at(where, field,
            expected_found("probabilities summing to 1", fmt::format("a sum of {:.6g}", sum)));
  }
}

std::string exit_point_list(const std::vector<int>& points) {
  return fmt::format("{}", fmt::join(points, ", "));
}

void check_position_rows(const Scenario& s, const Resolution& r, std::size_t exit_points) {
  const ExitPolicyConfig& e = s.exit_policy;
  const Resolved* buckets = r.get("exit_policy.position_buckets");
  for (std::size_t i = 0; buckets != nullptr && i < e.position_buckets.size(); ++i) {
    const std::string prefix = fmt::format("exit_policy.position_buckets[{}]", i);
    const auto& row = buckets->records[i];
    if (i > 0 && e.position_buckets[i].until_position <= e.position_buckets[i - 1].until_position) {
      fail_at(row[0].loc, prefix + ".until_position",
              expected_found(fmt::format("a position above {} (the previous bucket's)",
                                         e.position_buckets[i - 1].until_position),
                             fmt::format("{}", e.position_buckets[i].until_position)));
    }
    check_probabilities(e.position_buckets[i].probabilities, exit_points, row[1].loc,
                        prefix + ".probabilities");
  }
}

void check_schedule(const Scenario& s, const Resolution& r, const std::vector<int>& points) {
  const auto& steps = s.exit_policy.schedule;
  const Resolved* rows = r.get("exit_policy.schedule");
  if (steps.empty()) {
    fail_key(r, "exit_policy.schedule", expected_found("at least one step", "[]"));
  }
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const std::string prefix = fmt::format("exit_policy.schedule[{}]", i);
    const SourceLocation& from_loc = rows->records[i][0].loc;
    const SourceLocation& depth_loc = rows->records[i][1].loc;
    if (i == 0 && steps[i].from_position != 0) {
      fail_at(from_loc, prefix + ".from_position",
              expected_found("0 for the first step", fmt::format("{}", steps[i].from_position)));
    }
    if (i > 0 && steps[i].from_position <= steps[i - 1].from_position) {
      fail_at(from_loc, prefix + ".from_position",
              expected_found(fmt::format("a position above {} (the previous step's)",
                                         steps[i - 1].from_position),
                             fmt::format("{}", steps[i].from_position)));
    }
    if (std::find(points.begin(), points.end(), steps[i].depth) == points.end()) {
      fail_at(
          depth_loc, prefix + ".depth",
          expected_found(fmt::format("an exit point of the model ({})", exit_point_list(points)),
                         fmt::format("{}", steps[i].depth)));
    }
    if (i > 0 && steps[i].depth > steps[i - 1].depth) {
      fail_at(depth_loc, prefix + ".depth",
              expected_found(fmt::format("a depth <= {} (the previous step's)", steps[i - 1].depth),
                             fmt::format("{}", steps[i].depth)));
    }
  }
}

void check_exit_policy(const Scenario& s, const Resolution& r) {
  const ExitPolicyConfig& e = s.exit_policy;
  const DepthStructure& depth = s.model.shape.depth;
  if (is_recursive_only(e.kind) && !depth.is_recursive()) {
    fail_key(r, "exit_policy.kind",
             fmt::format("{} needs a recursive model; model.depth.recursions is 0", e.kind));
  }
  if (e.kind == "router_expert_choice" && e.router_mode == "top_k" &&
      e.capacities.size() != static_cast<std::size_t>(depth.recursions)) {
    fail_key(r, "exit_policy.capacities",
             expected_found(
                 fmt::format("one capacity per recursion ({}) in top_k mode", depth.recursions),
                 fmt::format("{}", e.capacities.size())));
  }
  const std::vector<int> points = depth.effective_exit_points();
  if (e.kind == "distribution") {
    check_probabilities(e.probabilities, points.size(), r.where("exit_policy.probabilities"),
                        "exit_policy.probabilities");
    check_position_rows(s, r, points.size());
  }
  if (e.kind == "position_schedule")
    check_schedule(s, r, points);
}

void check_sync(const Scenario& s, const Resolution& r) {
  if (is_recursive_only(s.sync.strategy) && !s.model.shape.depth.is_recursive()) {
    fail_key(
        r, "sync.strategy",
        fmt::format("{} needs a recursive model; model.depth.recursions is 0", s.sync.strategy));
  }
}

std::vector<std::string> scalar_paths() {
  std::vector<std::string> paths;
  for (const KeyDef& def : schema()) {
    const KeyDef* parent = find_key(def.parent());
    const bool in_records = parent != nullptr && parent->type == Type::records;
    if (def.is_scalar() && !in_records)
      paths.push_back(def.path);
  }
  return paths;
}

// Both passes and the replica groups: a whole scenario but for its sweep.
Scenario resolve_point(const Node& root, const std::string& source) {
  const Resolution resolution = resolve_tree(root, source);
  Scenario s = build_scenario(resolution);
  resolve_replica_groups(s, resolution, root, source);
  return s;
}

// Each sweep value must be valid for its key and must leave the whole scenario valid.
void check_sweep(Scenario& s, const Node& root, const std::string& source) {
  const Node* sweep = root.find("sweep");
  if (sweep == nullptr || sweep->kind != Node::Kind::list)
    return;
  const std::vector<std::string> paths = scalar_paths();
  // The scenario each value is tried in, without its sweep: copied per value, it must not carry
  // the value lists along (that made checking N values take N^2 time).
  Node base = root;
  std::erase_if(base.entries, [](const Node::Entry& e) { return e.key == "sweep"; });
  for (std::size_t i = 0; i < sweep->items.size(); ++i) {
    const Node& row = sweep->items[i];
    const Node& key_node = *row.find("key");
    const std::string& key = key_node.scalar;
    const std::string key_field = fmt::format("sweep[{}].key", i);
    const KeyDef* def = find_key(key);
    if (def == nullptr || !def->is_scalar() ||
        std::find(paths.begin(), paths.end(), key) == paths.end()) {
      const std::string near = nearest_match(key, paths);
      const std::string what = def == nullptr ? "unknown key" : "not a single-value key";
      fail_at(key_node.loc, key_field,
              near.empty() || near == key
                  ? fmt::format("{} \"{}\"; expected a key path such as scheduler.max_running",
                                what, key)
                  : fmt::format("{} \"{}\"; did you mean \"{}\"?", what, key, near));
    }
    for (std::size_t j = 0; j < i; ++j) {
      if (s.sweep[j].key == key) {
        fail_at(key_node.loc, key_field,
                fmt::format("duplicate sweep key \"{}\" (also sweep[{}].key)", key, j));
      }
    }
    const Node& values = *row.find("values");
    for (std::size_t j = 0; j < values.items.size(); ++j) {
      const Node& value = values.items[j];
      const std::string value_field = fmt::format("sweep[{}].values[{}]", i, j);
      const Resolved parsed = parse_value(*def, value, value_field);
      s.sweep[i].values[j] = canonical_text(parsed.value);
      Node point = base;
      set_path(point, key, value, value.loc);
      try {
        resolve_point(point, source);
      } catch (const InputError& e) {
        const std::string inner =
            e.where().field.empty() ? e.message() : e.where().field + ": " + e.message();
        fail_at(value.loc, value_field,
                fmt::format("with {} = {}: {}", key, s.sweep[i].values[j], inner));
      }
    }
  }
}

// model.hf_config's shape. A file that is not there is the scenario's error (at the key);
// what is wrong inside it is the file's (at its key).
ModelShape read_model_config(const Resolution& r, const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    fail_key(r, "model.hf_config",
             expected_found("the path of a Hugging Face config.json file",
                            fmt::format("\"{}\" ({})", path,
                                        std::filesystem::exists(path, ec) ? "not a regular file"
                                                                          : "no such file")));
  }
  return read_hf_config(path);
}

}  // namespace

Scenario build_scenario(const Resolution& r) {
  Scenario s;
  if (const Resolved* p = r.get("model.preset");
      p != nullptr && std::holds_alternative<std::string>(p->value)) {
    s.model.shape = *find_model_preset(std::get<std::string>(p->value));
  }
  if (const Resolved* h = r.get("model.hf_config");
      h != nullptr && std::holds_alternative<std::string>(h->value)) {
    s.model.shape = read_model_config(r, std::get<std::string>(h->value));
  }
  if (const Resolved* p = r.get("hardware.preset");
      p != nullptr && std::holds_alternative<std::string>(p->value)) {
    s.hardware.spec = *find_hardware_preset(std::get<std::string>(p->value));
  }
  for (const Resolved& value : r.values) {
    const KeyDef* def = find_key(value.key);
    if (def != nullptr && def->bind.store)
      def->bind.store(s, value);
  }
  // The config.json replaced the preset's shape (as --set model.hf_config does on a scenario
  // with a preset): the shape is no longer the preset's.
  if (!s.model.hf_config.empty())
    s.model.preset.clear();
  unclamp_empirical(s.workload.input_tokens, r, "workload.input_tokens");
  unclamp_empirical(s.workload.output_tokens, r, "workload.output_tokens");
  check_model(s, r);
  check_workload(s, r);
  check_exit_policy(s, r);
  check_sync(s, r);
  if (s.cluster.router == "prefix_affinity" && !s.scheduler.prefix_caching) {
    fail_key(r, "cluster.router",
             expected_found("scheduler.prefix_caching: true with prefix_affinity (without it no "
                            "replica ever holds a prefix to route by)",
                            "prefix caching off"));
  }
  return s;
}

Scenario resolve_scenario(const Node& root, const std::string& source) {
  Scenario s = resolve_point(root, source);
  check_sweep(s, root, source);
  return s;
}

}  // namespace exitsim::scenario::detail
