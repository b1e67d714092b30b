#pragma once

#include <string>
#include <vector>

#include "exitsim/scenario/scenario.hpp"
#include "schema.hpp"

namespace exitsim::scenario::detail {

// Whether a key applies to a resolved scenario: its condition holds, and the condition's own
// key applies.
bool applies(const KeyDef& def, const Scenario& s);

// The applicable value (non-section) keys under `section`, nested sections included, in schema
// order: what render_resolved_yaml writes for that section.
std::vector<const KeyDef*> applicable_values(const std::string& section, const Scenario& s);

// The applicable keys of `section` as one YAML flow mapping: "{kind: roofline, ...}".
std::string render_flow(const std::string& section, const Scenario& s);

}  // namespace exitsim::scenario::detail
