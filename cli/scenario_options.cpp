#include "scenario_options.hpp"

#include "exitsim/scenario/load.hpp"

namespace exitsim::cli {

void ScenarioOptions::add_to(CLI::App& command) {
  command.add_option("scenario", file, "Scenario YAML file (default: the embedded default)");
  command.add_option("--set", overrides, "Override a scenario key: key.path=value (repeatable)")
      ->type_name("KEY=VALUE");
}

scenario::Scenario ScenarioOptions::load() const {
  return file.empty() ? scenario::load_default_scenario(overrides)
                      : scenario::load_scenario_file(file, overrides);
}

}  // namespace exitsim::cli
