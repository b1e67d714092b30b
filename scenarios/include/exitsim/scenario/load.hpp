#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "exitsim/scenario/scenario.hpp"

namespace exitsim::scenario {

// Loading a scenario: parse the YAML, apply `overrides` (the CLI's --set "key.path=value"; the
// value is YAML, so "[1, 2]" and "null" work), validate every key against the schema, fill
// defaults, expand presets, check cross-field constraints and the sweep. Any problem is an
// exitsim::InputError whose what() is one line: "file:line:column: key.path: message".

Scenario load_scenario_file(const std::string& path, std::span<const std::string> overrides = {});

// The scenario embedded in the binary (scenarios/default.yaml); errors name "<embedded default>".
Scenario load_default_scenario(std::span<const std::string> overrides = {});

// `source_name` is what errors call the text (a path, "<stdin>", ...).
Scenario load_scenario_text(std::string_view yaml, std::string_view source_name,
                            std::span<const std::string> overrides = {});

// A scenario file (or the embedded default) read and parsed once, to load with different
// overrides: a sweep's points, a plan's candidates. load(o) gives what load_scenario_file(path, o)
// gives; a file that does not parse throws from file() already.
class ScenarioSource {
 public:
  static ScenarioSource file(const std::string& path);
  static ScenarioSource embedded_default();
  // `path` empty: the embedded default.
  static ScenarioSource file_or_default(const std::string& path);
  Scenario load(std::span<const std::string> overrides = {}) const;

 private:
  struct Parsed;
  explicit ScenarioSource(std::shared_ptr<const Parsed> parsed) : parsed_(std::move(parsed)) {}
  std::shared_ptr<const Parsed> parsed_;  // read-only, shared by copies (and threads)
};

// The scenario `path` (the embedded default when empty) with `overrides` applied, then every key
// of `overlay_path` laid over it: a YAML file of scenario sections, such as the hardware: and
// cost_model: sections `calibrate --against` writes; each key is set as --set would set it, and
// messages about it name the overlay's file and line. Relative paths in it are its folder's.
Scenario load_scenario_with_overlay(const std::string& path, std::span<const std::string> overrides,
                                    const std::string& overlay_path);

// The embedded default scenario's text.
std::string_view default_scenario_text();

// The resolved scenario as YAML: every applicable key in schema order, presets expanded (a preset
// model prints `preset:` and its full shape). Loading it gives back an equal Scenario.
std::string render_resolved_yaml(const Scenario& scenario);

// The reference section of docs/scenario.md, generated from the schema: one table per section
// with key path, type, default, allowed values and description. Starts and ends with marker
// comments so the docs file can embed it verbatim.
std::string render_schema_markdown();

// The same schema for tools (`exitsim scenario schema --json`): {"format": "exitsim-scenario-schema
// v1", "keys": [{"key", "type", "default", "allowed", "description", "applies_when"}, ...]} in
// schema order, sections included.
std::string render_schema_json();

// Plain text for `exitsim help KEY`: every key at or under `prefix` ("scheduler",
// "workload.trace"), one paragraph each; empty when no key matches.
std::string render_key_help(std::string_view prefix);

}  // namespace exitsim::scenario
