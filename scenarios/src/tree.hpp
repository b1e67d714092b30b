#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "exitsim/core/error.hpp"

namespace exitsim::scenario::detail {

// A parsed YAML document reduced to what the schema needs, with the place every node came from.
// yaml-cpp stays behind this type: it loses nothing the loader uses (kind, scalar text, order,
// marks) and lets --set values and file values carry different sources side by side.
struct Node {
  enum class Kind { null, scalar, list, map };
  struct Entry;

  Kind kind = Kind::null;
  std::string scalar;
  std::vector<Node> items;     // list
  std::vector<Entry> entries;  // map, in document order
  SourceLocation loc;          // file, 1-based line and column; field left empty

  const Node* find(std::string_view key) const;
  Node* find(std::string_view key);
};

struct Node::Entry {
  std::string key;
  SourceLocation key_loc;
  Node value;
};

// "a mapping", "a list", "null" or the quoted scalar: how a found value reads in messages.
std::string describe(const Node& node);

// Parses one YAML document. An empty document is an empty mapping. Throws InputError with the
// source name, line and column on malformed YAML, duplicate keys or more than one document.
Node parse_yaml(std::string_view text, const std::string& source_name);

// Parses a --set value: any YAML (scalar, flow list, flow map, null); every node's location is
// {"--set", 0, 0}.
Node parse_override_value(std::string_view text, const std::string& key_path);

}  // namespace exitsim::scenario::detail
