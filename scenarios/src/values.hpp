#pragma once

#include <string>

#include "schema.hpp"
#include "tree.hpp"

namespace exitsim::scenario::detail {

// Checks a node against a non-section, non-records key and returns its typed value. Throws
// InputError at the node with `field` (the key path, with [i] for list items) on a wrong type,
// a value out of range or an unknown enum value.
Resolved parse_value(const KeyDef& def, const Node& node, const std::string& field);

// What a key accepts, as messages say it: "an integer in [1, 1000000]", "one of a, b".
std::string expected_text(const KeyDef& def);
// The type column of the docs: "integer", "enum", "list of numbers".
std::string type_name(const KeyDef& def);
// The allowed-values column of the docs: "[1, 1000000]", "poisson, gamma", "".
std::string allowed_text(const KeyDef& def);

// A value as YAML text: null, true, 42, 0.85, [1, 2], plain or double-quoted strings.
std::string format_value(const Value& value);
std::string format_string(const std::string& text);
std::string format_number(double x);

// Canonical text of a value: what a sweep axis stores.
std::string canonical_text(const Value& value);

}  // namespace exitsim::scenario::detail
