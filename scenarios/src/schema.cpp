#include "schema.hpp"

#include <cmath>
#include <string_view>
#include <unordered_map>

namespace exitsim::scenario::detail {

std::string KeyDef::name() const {
  const auto dot = path.rfind('.');
  return dot == std::string::npos ? path : path.substr(dot + 1);
}

std::string_view KeyDef::parent() const {
  const auto dot = path.rfind('.');
  return dot == std::string::npos ? std::string_view{} : std::string_view(path).substr(0, dot);
}

bool KeyDef::is_scalar() const {
  switch (type) {
    case Type::integer:
    case Type::number:
    case Type::boolean:
    case Type::string:
    case Type::enumeration:
    case Type::identifier:
      return true;
    default:
      return false;
  }
}

const std::vector<KeyDef>& schema() {
  static const std::vector<KeyDef> table = [] {
    std::vector<KeyDef> all;
    for (auto part : {general_keys, model_keys, hardware_keys, workload_keys, exit_policy_keys,
                      serving_keys, output_keys}) {
      std::vector<KeyDef> rows = part();
      all.insert(all.end(), std::make_move_iterator(rows.begin()),
                 std::make_move_iterator(rows.end()));
    }
    return all;
  }();
  return table;
}

namespace {

// The schema by path and by parent (children in schema order), built once: a scenario's
// resolution asks for both at every key, and a sweep resolves one scenario per point.
struct SchemaIndex {
  std::unordered_map<std::string_view, const KeyDef*> by_path;
  std::unordered_map<std::string_view, std::vector<const KeyDef*>> by_parent;
};

const SchemaIndex& schema_index() {
  static const SchemaIndex index = [] {
    SchemaIndex built;
    for (const KeyDef& def : schema()) {
      built.by_path.emplace(def.path, &def);  // the first of a path, as a scan would find
      built.by_parent[def.parent()].push_back(&def);
    }
    return built;
  }();
  return index;
}

}  // namespace

const KeyDef* find_key(std::string_view path) {
  const auto& by_path = schema_index().by_path;
  const auto it = by_path.find(path);
  return it != by_path.end() ? it->second : nullptr;
}

const std::vector<const KeyDef*>& children_of(std::string_view parent) {
  static const std::vector<const KeyDef*> none;
  const auto& by_parent = schema_index().by_parent;
  const auto it = by_parent.find(parent);
  return it != by_parent.end() ? it->second : none;
}

std::vector<std::string> child_names(std::string_view parent) {
  std::vector<std::string> names;
  for (const KeyDef* def : children_of(parent))
    names.push_back(def->name());
  return names;
}

double unscale(double stored, double scale) {
  const double guess = stored / scale;
  // The quotient is within a few ulps of a value that multiplies back exactly; look around it.
  double down = guess;
  double up = guess;
  for (int step = 0; step < 8; ++step) {
    if (down * scale == stored)
      return down;
    if (up * scale == stored)
      return up;
    down = std::nextafter(down, -INFINITY);
    up = std::nextafter(up, INFINITY);
  }
  return guess;
}

const Resolved& cell(const std::vector<Resolved>& row, const std::string& key) {
  for (const Resolved& r : row) {
    if (r.key == key)
      return r;
  }
  static const Resolved k_missing;
  return k_missing;
}

}  // namespace exitsim::scenario::detail
