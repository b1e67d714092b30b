#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "exitsim/scenario/scenario.hpp"
#include "schema.hpp"
#include "tree.hpp"

namespace exitsim::scenario::detail {

// Every applicable key of a document with its validated value (given or default), in schema
// order. Keys that do not apply to the chosen kinds are absent.
struct Resolution {
  std::string source;
  std::vector<Resolved> values;

  const Resolved* get(std::string_view path) const;
  // The place to blame for a key: where it was written, else the file.
  SourceLocation where(std::string_view path) const;
};

// Pass 1: keys, types, ranges, enums, applicability, defaults. Throws InputError.
Resolution resolve_tree(const Node& root, const std::string& source);

// Pass 2: the Scenario from a resolution, with cross-field checks. Throws InputError.
Scenario build_scenario(const Resolution& resolution);

// Both passes plus the sweep (each value checked against its key and against the whole
// scenario with that value in place).
Scenario resolve_scenario(const Node& root, const std::string& source);

// Sets `path` (dot-separated, checked against the schema) to `value`, creating sections.
void set_path(Node& root, const std::string& path, Node value, const SourceLocation& key_loc);

// Applies one --set assignment `key.path=value`.
void apply_override(Node& root, const std::string& assignment);

// Sets every key of `overlay` (a document of scenario sections) in `root` as --set would set it,
// keeping the overlay's places for messages: a section's keys one by one, any other value whole.
void apply_overlay(Node& root, const Node& overlay);

}  // namespace exitsim::scenario::detail
