#include "schema.hpp"

#include <cmath>

namespace exitsim::scenario::detail {

std::string KeyDef::name() const {
  const auto dot = path.rfind('.');
  return dot == std::string::npos ? path : path.substr(dot + 1);
}

std::string KeyDef::parent() const {
  const auto dot = path.rfind('.');
  return dot == std::string::npos ? std::string{} : path.substr(0, dot);
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

const KeyDef* find_key(std::string_view path) {
  for (const KeyDef& def : schema()) {
    if (def.path == path)
      return &def;
  }
  return nullptr;
}

std::vector<const KeyDef*> children_of(std::string_view parent) {
  std::vector<const KeyDef*> out;
  for (const KeyDef& def : schema()) {
    if (def.parent() == parent)
      out.push_back(&def);
  }
  return out;
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

}  // namespace exitsim::scenario::detail
