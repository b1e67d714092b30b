// Rendering from the schema table: the resolved scenario as YAML, and the docs reference.
#include "render.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "exitsim/scenario/load.hpp"
#include "input_paths.hpp"
#include "schema.hpp"
#include "values.hpp"

namespace exitsim::scenario {
namespace detail {

bool applies(const KeyDef& def, const Scenario& s) {
  if (def.when.empty())
    return true;
  const KeyDef* on = find_key(def.when.key);
  if (on == nullptr || !applies(*on, s))
    return false;
  // A condition key inside an inapplicable section does not hold either.
  for (const KeyDef* up = find_key(on->parent()); up != nullptr; up = find_key(up->parent())) {
    if (!applies(*up, s))
      return false;
  }
  const std::string text = canonical_text(on->bind.load(s).value);
  return std::find(def.when.values.begin(), def.when.values.end(), text) != def.when.values.end();
}

std::vector<const KeyDef*> applicable_values(const std::string& section, const Scenario& s) {
  std::vector<const KeyDef*> out;
  for (const KeyDef* def : children_of(section)) {
    if (!applies(*def, s))
      continue;
    if (def->type == Type::section) {
      const std::vector<const KeyDef*> inner = applicable_values(def->path, s);
      out.insert(out.end(), inner.begin(), inner.end());
    } else {
      out.push_back(def);
    }
  }
  return out;
}

std::string render_flow(const std::string& section, const Scenario& s) {
  std::vector<std::string> parts;
  for (const KeyDef* def : children_of(section)) {
    if (!applies(*def, s))
      continue;
    const std::string value = def->type == Type::section ? render_flow(def->path, s)
                                                         : format_value(def->bind.load(s).value);
    parts.push_back(fmt::format("{}: {}", def->name(), value));
  }
  return fmt::format("{{{}}}", fmt::join(parts, ", "));
}

}  // namespace detail

namespace {

using detail::applies;
using detail::KeyDef;
using detail::Type;

void render_section(const std::string& parent, int depth, const Scenario& s, std::string& out) {
  const std::string indent(static_cast<std::size_t>(depth) * 2, ' ');
  for (const KeyDef* def : detail::children_of(parent)) {
    if (!applies(*def, s))
      continue;
    if (def->type == Type::section) {
      out += indent + def->name() + ":\n";
      render_section(def->path, depth + 1, s, out);
    } else if (def->type == Type::records) {
      const detail::Resolved r = def->bind.load(s);
      if (r.records.empty()) {
        out += indent + def->name() + ": []\n";
        continue;
      }
      out += indent + def->name() + ":\n";
      for (const auto& row : r.records) {
        for (std::size_t i = 0; i < row.size(); ++i) {
          const std::string name = row[i].key.substr(row[i].key.rfind('.') + 1);
          out += fmt::format("{}{}{}: {}\n", indent, i == 0 ? "  - " : "    ", name,
                             detail::format_value(row[i].value));
        }
      }
    } else if (const detail::Resolved r = def->bind.load(s); r.given) {
      out += fmt::format("{}{}: {}\n", indent, def->name(), detail::format_value(r.value));
    }
  }
}

std::string default_text(const KeyDef& def) {
  const auto value = [&] {
    if (def.type == Type::records)
      return std::string("`[]`");
    return fmt::format("`{}`", detail::format_value(def.default_value));
  };
  switch (def.default_kind) {
    case detail::DefaultKind::value:
      return value();
    case detail::DefaultKind::required:
      return "required";
    case detail::DefaultKind::preset:
      return value() + " unless shape keys are given";
    case detail::DefaultKind::from_preset:
      return "from preset; required without one";
    case detail::DefaultKind::from_preset_or_value:
      return "from preset, else " + value();
  }
  return "";
}

std::string escape_cell(std::string text) {
  std::string out;
  for (char c : text) {
    if (c == '|')
      out += '\\';
    out += c;
  }
  return out;
}

// The path as docs show it: items of a list of mappings get "[]".
std::string display_path(const KeyDef& def) {
  const KeyDef* parent = detail::find_key(def.parent());
  if (parent != nullptr && parent->type == Type::records) {
    return display_path(*parent) + "[]." + def.name();
  }
  return def.path;
}

std::string description(const KeyDef& def) {
  std::string text = def.doc;
  if (def.input_path)
    text += std::string(" ") + std::string(detail::k_input_path_note);
  if (!def.when.empty()) {
    std::vector<std::string> quoted;
    for (const std::string& v : def.when.values)
      quoted.push_back("`" + v + "`");
    text += fmt::format(" Applies when `{}` is {}.", def.when.key, fmt::join(quoted, " or "));
  }
  return escape_cell(text);
}

void table_rows(const std::string& parent, std::string& out) {
  for (const KeyDef* def : detail::children_of(parent)) {
    if (def->type == Type::section) {
      out += fmt::format("| `{}` | section | | | {} |\n", display_path(*def), description(*def));
    } else {
      out += fmt::format("| `{}` | {} | {} | {} | {} |\n", display_path(*def),
                         detail::type_name(*def), escape_cell(default_text(*def)),
                         escape_cell(detail::allowed_text(*def)), description(*def));
    }
    if (def->type == Type::section || def->type == Type::records)
      table_rows(def->path, out);
  }
}

constexpr std::string_view k_table_header =
    "| key | type | default | allowed | description |\n|---|---|---|---|---|\n";

}  // namespace

std::string render_resolved_yaml(const Scenario& scenario) {
  std::string out =
      "# Resolved scenario: every key that applies, with defaults filled and presets expanded.\n";
  render_section("", 0, scenario, out);
  return out;
}

std::string render_schema_markdown() {
  std::string out =
      "<!-- BEGIN GENERATED SCHEMA: regenerate with `exitsim scenario schema` or "
      "EXITSIM_UPDATE_DOCS=1 scenario_tests -->\n";
  out += "## Top-level keys\n\n";
  out += k_table_header;
  for (const KeyDef* def : detail::children_of("")) {
    if (def->type != Type::section && def->type != Type::records) {
      out += fmt::format("| `{}` | {} | {} | {} | {} |\n", def->path, detail::type_name(*def),
                         escape_cell(default_text(*def)), escape_cell(detail::allowed_text(*def)),
                         description(*def));
    }
  }
  for (const KeyDef* def : detail::children_of("")) {
    if (def->type != Type::section && def->type != Type::records)
      continue;
    out += fmt::format("\n## `{}`\n\n{}\n\n", def->path, escape_cell(def->doc));
    out += k_table_header;
    if (def->type == Type::records) {
      out += fmt::format("| `{}` | {} | {} | | {} |\n", def->path, detail::type_name(*def),
                         escape_cell(default_text(*def)), description(*def));
    }
    table_rows(def->path, out);
  }
  out += "<!-- END GENERATED SCHEMA -->\n";
  return out;
}

namespace {

std::string raw_description(const KeyDef& def) {
  return def.doc;
}

// Defaults and allowed values as plain text: the Markdown table quotes values in backticks.
std::string unquoted(std::string text) {
  std::erase(text, '`');
  return text;
}

}  // namespace

std::string render_schema_json() {
  nlohmann::ordered_json keys = nlohmann::ordered_json::array();
  for (const KeyDef& def : detail::schema()) {
    nlohmann::ordered_json key;
    key["key"] = display_path(def);
    key["type"] = def.type == Type::section ? std::string("section") : detail::type_name(def);
    if (def.type != Type::section) {
      key["default"] = unquoted(default_text(def));
      key["allowed"] = unquoted(detail::allowed_text(def));
    }
    key["description"] = raw_description(def);
    if (def.input_path)
      key["input_path"] = true;
    if (!def.when.empty())
      key["applies_when"] = {{"key", def.when.key}, {"values", def.when.values}};
    keys.push_back(std::move(key));
  }
  nlohmann::ordered_json root;
  root["format"] = "exitsim-scenario-schema v1";
  root["keys"] = std::move(keys);
  return root.dump(2) + "\n";
}

std::string render_key_help(std::string_view prefix) {
  std::string out;
  for (const KeyDef& def : detail::schema()) {
    const std::string path = display_path(def);
    const bool under =
        path == prefix ||
        (path.size() > prefix.size() && path.compare(0, prefix.size(), prefix) == 0 &&
         (path[prefix.size()] == '.' || path[prefix.size()] == '['));
    if (!under)
      continue;
    if (def.type == Type::section) {
      out += fmt::format("{} (section)\n", path);
    } else {
      const std::string allowed = unquoted(detail::allowed_text(def));
      out +=
          fmt::format("{} ({}, default {}{})\n", path, detail::type_name(def),
                      unquoted(default_text(def)), allowed.empty() ? "" : ", allowed " + allowed);
    }
    std::string text = def.doc;
    if (def.input_path)
      text += std::string(" ") + std::string(detail::k_input_path_note);
    if (!def.when.empty())
      text +=
          fmt::format(" Applies when {} is {}.", def.when.key, fmt::join(def.when.values, " or "));
    out += "    " + text + "\n";
  }
  return out;
}

}  // namespace exitsim::scenario
