#pragma once

#include <string>
#include <string_view>

#include "tree.hpp"

namespace exitsim::scenario::detail {

// What every input-path key's description adds (docs/scenario.md, exitsim help).
inline constexpr std::string_view k_input_path_note =
    "A relative path is relative to the scenario file (to the working directory in --set); "
    "$EXITSIM_TRACES at its start stands for the folder that environment variable names.";

// The environment variable naming the folder of the public request traces, which live outside
// the repository.
inline constexpr std::string_view k_traces_variable = "EXITSIM_TRACES";

// Rewrites the input paths of a scenario file's tree (KeyDef::input_path), the cluster.groups'
// `set` assignments included: a relative path becomes one under `scenario_dir`. Then expands
// $EXITSIM_TRACES at the start of any input path. Throws InputError at the value's place when the
// variable is unset or empty.
void resolve_file_input_paths(Node& root, const std::string& scenario_dir);

// The same expansion for a --set value of key `key_path` (relative paths stay as given: they are
// the working directory's).
void expand_override_path(Node& value, std::string_view key_path);

}  // namespace exitsim::scenario::detail
