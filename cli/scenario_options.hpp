#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "exitsim/scenario/scenario.hpp"

namespace exitsim::cli {

// The scenario selection every scenario-driven command shares: an optional file (the embedded
// default without one) and repeated --set key.path=value overrides.
struct ScenarioOptions {
  std::string file;
  std::vector<std::string> overrides;

  void add_to(CLI::App& command);
  scenario::Scenario load() const;
};

}  // namespace exitsim::cli
