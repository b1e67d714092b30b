// The one line a scenario (named "s.yaml") with these --set values is refused with, or "no error".
#pragma once

#include <string>
#include <vector>

#include "exitsim/core/error.hpp"
#include "exitsim/scenario/load.hpp"

namespace exitsim::scenario::test_support {

inline std::string error_of(const std::string& yaml, const std::vector<std::string>& set = {}) {
  try {
    load_scenario_text(yaml, "s.yaml", set);
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace exitsim::scenario::test_support
