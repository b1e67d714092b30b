#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <memory>

#include "commands.hpp"
#include "exitsim/scenario/load.hpp"
#include "scenario_options.hpp"

namespace exitsim::cli {

void add_scenario_commands(CLI::App& app) {
  CLI::App* group = app.add_subcommand("scenario", "Inspect scenarios and their schema");
  group->require_subcommand(1);

  auto show_options = std::make_shared<ScenarioOptions>();
  CLI::App* show = group->add_subcommand(
      "show", "Print the fully resolved scenario: every key, defaults applied, presets expanded");
  show_options->add_to(*show);
  show->callback(
      [show_options] { fmt::print("{}", scenario::render_resolved_yaml(show_options->load())); });

  CLI::App* schema =
      group->add_subcommand("schema", "Print every scenario key with its type, default and doc");
  auto as_json = std::make_shared<bool>(false);
  schema->add_flag("--json", *as_json, "Machine-readable: one JSON object per key");
  schema->callback([as_json] {
    fmt::print("{}",
               *as_json ? scenario::render_schema_json() : scenario::render_schema_markdown());
  });
}

}  // namespace exitsim::cli
