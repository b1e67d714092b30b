#include "input_paths.hpp"

#include <cstdlib>
#include <filesystem>

#include "schema.hpp"

namespace exitsim::scenario::detail {
namespace {

const std::string k_groups = "cluster.groups";

bool is_input_path(std::string_view key_path) {
  const KeyDef* def = find_key(key_path);
  return def != nullptr && def->input_path;
}

std::string traces_expected() {
  return "$" + std::string(k_traces_variable) +
         " to name the folder of the public request traces (export " +
         std::string(k_traces_variable) + "=/path/to/traces)";
}

// "$EXITSIM_TRACES/x" or "${EXITSIM_TRACES}/x": the folder's path and the rest; otherwise the
// text unchanged.
std::string expand_traces(const std::string& text, const SourceLocation& where) {
  const std::string plain = "$" + std::string(k_traces_variable);
  const std::string braced = "${" + std::string(k_traces_variable) + "}";
  std::size_t skip = 0;
  if (text.starts_with(braced))
    skip = braced.size();
  else if (text.starts_with(plain) && (text.size() == plain.size() || text[plain.size()] == '/'))
    skip = plain.size();
  if (skip == 0)
    return text;
  const char* folder = std::getenv(std::string(k_traces_variable).c_str());
  if (folder == nullptr || *folder == '\0') {
    throw InputError(where, expected_found(traces_expected(), "it unset"));
  }
  return std::string(folder) + text.substr(skip);
}

std::string beside(const std::string& path, const std::string& scenario_dir) {
  if (path.empty() || path.starts_with("$") || std::filesystem::path(path).is_absolute() ||
      scenario_dir.empty())
    return path;
  return (std::filesystem::path(scenario_dir) / path).lexically_normal().string();
}

void resolve_scalar(Node& value, const std::string& key_path, const std::string& scenario_dir) {
  if (value.kind != Node::Kind::scalar)
    return;
  SourceLocation where = value.loc;
  where.field = key_path;
  value.scalar = expand_traces(beside(value.scalar, scenario_dir), where);
}

// A group's "key=value" assignment, rewritten in place when its key is an input path.
void resolve_assignment(Node& assignment, const std::string& scenario_dir) {
  if (assignment.kind != Node::Kind::scalar)
    return;
  const std::size_t equals = assignment.scalar.find('=');
  if (equals == std::string::npos)
    return;
  const std::string key = assignment.scalar.substr(0, equals);
  if (!is_input_path(key))
    return;
  Node value;
  value.kind = Node::Kind::scalar;
  value.scalar = assignment.scalar.substr(equals + 1);
  value.loc = assignment.loc;
  resolve_scalar(value, k_groups + ".set: " + key, scenario_dir);
  assignment.scalar = key + "=" + value.scalar;
}

void walk(Node& node, const std::string& path, const std::string& scenario_dir) {
  if (node.kind != Node::Kind::map)
    return;
  for (Node::Entry& entry : node.entries) {
    const std::string key_path = path.empty() ? entry.key : path + "." + entry.key;
    if (key_path == k_groups && entry.value.kind == Node::Kind::list) {
      for (Node& group : entry.value.items) {
        if (Node* set = group.find("set"); set != nullptr && set->kind == Node::Kind::list) {
          for (Node& assignment : set->items)
            resolve_assignment(assignment, scenario_dir);
        }
      }
    } else if (is_input_path(key_path)) {
      resolve_scalar(entry.value, key_path, scenario_dir);
    } else {
      walk(entry.value, key_path, scenario_dir);
    }
  }
}

}  // namespace

void resolve_file_input_paths(Node& root, const std::string& scenario_dir) {
  walk(root, "", scenario_dir);
}

void expand_override_path(Node& value, std::string_view key_path) {
  if (is_input_path(key_path))
    resolve_scalar(value, std::string(key_path), "");
  else
    walk(value, std::string(key_path), "");  // a whole section set at once
}

}  // namespace exitsim::scenario::detail
