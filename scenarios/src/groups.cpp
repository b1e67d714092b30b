// Replica groups: the scenario re-resolved once per group with the group's overrides, so every
// per-group key goes through the same schema, defaults, presets and checks as --set.
#include "groups.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "exitsim/core/presets.hpp"
#include "exitsim/core/suggest.hpp"
#include "render.hpp"
#include "values.hpp"

namespace exitsim::scenario::detail {
namespace {

const std::string k_groups = "cluster.groups";

// Only what a replica is made of may differ; the workload, policies and SLOs are the cluster's.
const std::vector<std::string> k_group_sections = {"model", "hardware", "cost_model", "scheduler",
                                                   "parallel"};

[[noreturn]] void fail_at(SourceLocation where, const std::string& field,
                          const std::string& message) {
  where.field = field;
  throw InputError(std::move(where), message);
}

// An error from inside a group, told under the group's field: "inner.key: message".
std::string nested_message(const InputError& e) {
  return e.where().field.empty() ? e.message() : e.where().field + ": " + e.message();
}

// Override values take the place of their `set` string, so any later error about them points
// at that string in the file.
void relocate(Node& node, const SourceLocation& loc) {
  node.loc = loc;
  for (Node& item : node.items)
    relocate(item, loc);
  for (Node::Entry& entry : node.entries) {
    entry.key_loc = loc;
    relocate(entry.value, loc);
  }
}

void check_group_section(const std::string& key, const SourceLocation& loc,
                         const std::string& field) {
  const std::string first = key.substr(0, key.find('.'));
  if (std::find(k_group_sections.begin(), k_group_sections.end(), first) !=
      k_group_sections.end()) {
    return;
  }
  if (find_key(first) != nullptr) {
    fail_at(loc, field,
            fmt::format("{}: only model, hardware, cost_model, scheduler and parallel keys may "
                        "differ between replica groups",
                        key));
  }
  const std::string near = nearest_match(first, k_group_sections);
  const std::string hint = near.empty() ? "expected " + one_of(k_group_sections)
                                        : fmt::format("did you mean \"{}\"?", near);
  fail_at(loc, field, fmt::format("{}: unknown key \"{}\"; {}", key, first, hint));
}

void apply_group_override(Node& root, const std::string& assignment, const SourceLocation& loc,
                          const std::string& field) {
  const std::size_t eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0) {
    fail_at(loc, field, expected_found("key.path=value", fmt::format("\"{}\"", assignment)));
  }
  const std::string key = assignment.substr(0, eq);
  check_group_section(key, loc, field);
  try {
    Node value = parse_override_value(assignment.substr(eq + 1), key);
    relocate(value, loc);
    set_path(root, key, value, loc);
    // A bad value is reported now, naming its string, rather than when the group resolves.
    const KeyDef* def = find_key(key);
    if (def->type != Type::section && def->type != Type::records)
      parse_value(*def, value, key);
  } catch (const InputError& e) {
    fail_at(loc, field, nested_message(e));
  }
}

Scenario with_group(const Scenario& base, const ReplicaGroup& group) {
  Scenario s = base;
  s.model = group.model;
  s.hardware = group.hardware;
  s.cost_model = group.cost_model;
  s.scheduler = group.scheduler;
  s.parallel = group.parallel;
  return s;
}

// The preset a section is exactly, if any: then "section={preset: name}" says it all.
std::string exact_preset(const std::string& section, const ReplicaGroup& group) {
  if (section == "model" && !group.model.preset.empty() &&
      find_model_preset(group.model.preset) == group.model.shape) {
    return group.model.preset;
  }
  if (section == "hardware" && !group.hardware.preset.empty() &&
      find_hardware_preset(group.hardware.preset) == group.hardware.spec) {
    return group.hardware.preset;
  }
  return "";
}

}  // namespace

std::vector<std::string> canonical_overrides(const Scenario& base, const ReplicaGroup& group) {
  const Scenario mine = with_group(base, group);
  std::vector<std::string> out;
  for (const std::string& section : k_group_sections) {
    const std::vector<const KeyDef*> keys = applicable_values(section, mine);
    const bool same_keys = keys == applicable_values(section, base);
    std::vector<std::string> changed;
    for (const KeyDef* def : keys) {
      const Value value = def->bind.load(mine).value;
      if (!same_keys || value != def->bind.load(base).value)
        changed.push_back(def->path + "=" + format_value(value));
    }
    if (changed.empty())
      continue;
    if (const std::string preset = exact_preset(section, group); !preset.empty()) {
      out.push_back(fmt::format("{}={{preset: {}}}", section, format_string(preset)));
    } else if (same_keys) {
      out.insert(out.end(), changed.begin(), changed.end());
    } else {
      // Keys that apply to one and not the other (a changed kind): replace the whole section,
      // or the base's keys that no longer apply would be errors.
      out.push_back(section + "=" + render_flow(section, mine));
    }
  }
  return out;
}

void resolve_replica_groups(Scenario& s, const Resolution& r, const Node& root,
                            const std::string& source) {
  s.replica_groups.clear();
  const Resolved* groups = r.get(k_groups);
  if (groups == nullptr || groups->records.empty()) {
    s.replica_groups.push_back(ReplicaGroup{
        s.cluster.replicas, s.model, s.hardware, s.cost_model, s.scheduler, s.parallel, {}});
    return;
  }
  if (const Resolved* replicas = r.get("cluster.replicas");
      replicas != nullptr && replicas->given) {
    fail_at(replicas->loc, "cluster.replicas",
            "give replicas or groups, not both; with groups the replica count is the sum of "
            "their counts");
  }
  // Each group is the document without the sweep (checked once, over the whole scenario) and
  // without the groups themselves.
  Node base = root;
  std::erase_if(base.entries, [](const Node::Entry& e) { return e.key == "sweep"; });
  if (Node* cluster = base.find("cluster"))
    std::erase_if(cluster->entries, [](const Node::Entry& e) { return e.key == "groups"; });

  std::int64_t total = 0;
  for (std::size_t i = 0; i < groups->records.size(); ++i) {
    const std::vector<Resolved>& row = groups->records[i];
    const std::string prefix = fmt::format("{}[{}]", k_groups, i);
    const Resolved& set = cell(row, k_groups + ".set");
    const auto& assignments = std::get<std::vector<std::string>>(set.value);
    Node point = base;
    for (std::size_t j = 0; j < assignments.size(); ++j) {
      apply_group_override(point, assignments[j], set.item_locs[j],
                           fmt::format("{}.set[{}]", prefix, j));
    }
    Scenario resolved;
    try {
      resolved = build_scenario(resolve_tree(point, source));
    } catch (const InputError& e) {
      fail_at(e.where(), prefix, nested_message(e));
    }
    ReplicaGroup group{std::get<std::int64_t>(cell(row, k_groups + ".count").value),
                       resolved.model,
                       resolved.hardware,
                       resolved.cost_model,
                       resolved.scheduler,
                       resolved.parallel,
                       {}};
    group.overrides = canonical_overrides(s, group);
    total += group.count;
    s.replica_groups.push_back(std::move(group));
  }
  if (total > k_max_replicas) {
    fail_at(groups->loc, k_groups,
            expected_found(fmt::format("at most {} replicas in all", k_max_replicas),
                           fmt::format("{}", total)));
  }
  s.cluster.replicas = total;
}

}  // namespace exitsim::scenario::detail
