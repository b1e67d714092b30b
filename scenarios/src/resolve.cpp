#include "resolve.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "exitsim/core/suggest.hpp"
#include "input_paths.hpp"
#include "values.hpp"

namespace exitsim::scenario::detail {
namespace {

std::string join(std::string_view parent, std::string_view name) {
  return parent.empty() ? std::string(name) : fmt::format("{}.{}", parent, name);
}

// "is a", "is a or b", "is one of a, b, c"
std::string is_values(const std::vector<std::string>& values) {
  if (values.size() == 1)
    return "is " + values.front();
  if (values.size() == 2)
    return "is " + values[0] + " or " + values[1];
  return "is " + one_of(values);
}

const Node::Entry* find_entry(const Node* node, const std::string& key) {
  if (node == nullptr)
    return nullptr;
  for (const Node::Entry& e : node->entries) {
    if (e.key == key)
      return &e;
  }
  return nullptr;
}

[[noreturn]] void fail(SourceLocation where, const std::string& field, const std::string& message) {
  where.field = field;
  throw InputError(std::move(where), message);
}

// Unknown keys of a mapping, with the nearest valid key as a hint.
void check_unknown(const std::string& parent, const std::string& field_prefix, const Node& map) {
  const std::vector<std::string> names = child_names(parent);
  for (const Node::Entry& e : map.entries) {
    if (std::find(names.begin(), names.end(), e.key) != names.end())
      continue;
    const std::string near = nearest_match(e.key, names);
    const std::string hint =
        near.empty() ? "expected " + one_of(names) : fmt::format("did you mean \"{}\"?", near);
    fail(e.key_loc, join(field_prefix, e.key), fmt::format("unknown key \"{}\"; {}", e.key, hint));
  }
}

class Resolver {
 public:
  explicit Resolver(const std::string& source) { out_.source = source; }

  Resolution run(const Node& root) {
    section("", &root, true, &root);
    return std::move(out_);
  }

 private:
  bool holds(const Condition& c) const {
    if (c.empty())
      return true;
    const Resolved* r = out_.get(c.key);
    if (r == nullptr)
      return false;
    const std::string text = canonical_text(r->value);
    return std::find(c.values.begin(), c.values.end(), text) != c.values.end();
  }

  SourceLocation file_only() const { return SourceLocation{out_.source, 0, 0, ""}; }

  [[noreturn]] void not_applicable(const KeyDef& def, const Node::Entry& entry) const {
    const std::string uses = fmt::format("{} {}", def.when.key, is_values(def.when.values));
    if (const Resolved* r = out_.get(def.when.key)) {
      fail(entry.key_loc, def.path,
           fmt::format("\"{}\" is not used when {} is {}; it applies when {}", def.name(),
                       def.when.key, canonical_text(r->value), uses));
    }
    fail(entry.key_loc, def.path, fmt::format("\"{}\" applies only when {}", def.name(), uses));
  }

  // A file key that no longer applies because --set changed the kind it depends on (say
  // `--set workload.source=trace` on a file with `input_tokens`) is dropped: the command line
  // overrides the file, as it does for every other key. In a file alone it stays an error.
  bool switched_off_by_override(const KeyDef& def, const Node::Entry& entry) const {
    if (def.when.empty() || entry.key_loc.file == "--set")
      return false;
    const Resolved* condition = out_.get(def.when.key);
    return condition != nullptr && condition->loc.file == "--set";
  }

  [[noreturn]] void missing(const KeyDef& def, const Node* parent, const std::string& field,
                            const std::string& why) const {
    const SourceLocation where = parent != nullptr ? parent->loc : file_only();
    fail(where, field, fmt::format("missing required key \"{}\"{}", def.name(), why));
  }

  std::string missing_reason(const KeyDef& def) const {
    if (def.default_kind == DefaultKind::from_preset) {
      const std::string sources = shape_sources(def.preset_key);
      return fmt::format(" (needed when {} {} null)", sources,
                         sources == def.preset_key ? "is" : "are");
    }
    for (const KeyDef* k = &def; k != nullptr; k = find_key(k->parent())) {
      if (!k->when.empty()) {
        return fmt::format(" (needed when {} {})", k->when.key, is_values(k->when.values));
      }
    }
    return "";
  }

  // The preset, or another source of the section's shape (model.hf_config), is given.
  bool has_preset(const std::string& preset_key) const {
    const auto names_one = [&](const std::string& key) {
      const Resolved* r = out_.get(key);
      return r != nullptr && std::holds_alternative<std::string>(r->value);
    };
    if (names_one(preset_key))
      return true;
    const KeyDef* preset = find_key(preset_key);
    for (const KeyDef* sibling : children_of(preset != nullptr ? preset->parent() : "")) {
      if (sibling->shape_source && names_one(sibling->path))
        return true;
    }
    return false;
  }

  // "model.preset", or "model.preset and model.hf_config": what must be null for a key that
  // defaults from them to be required.
  static std::string shape_sources(const std::string& preset_key) {
    std::string names = preset_key;
    const KeyDef* preset = find_key(preset_key);
    for (const KeyDef* sibling : children_of(preset != nullptr ? preset->parent() : "")) {
      if (sibling->shape_source)
        names += " and " + sibling->path;
    }
    return names;
  }

  // `anchor` is the nearest mapping that exists in the document: a missing key of an absent
  // section is reported there rather than nowhere.
  void section(const std::string& path, const Node* node, bool applicable, const Node* anchor) {
    if (node != nullptr && node->kind == Node::Kind::null)
      node = nullptr;
    if (node != nullptr && node->kind != Node::Kind::map) {
      fail(node->loc, path, expected_found("a mapping", describe(*node)));
    }
    if (node != nullptr) {
      check_unknown(path, path, *node);
      anchor = node;
    }
    for (const KeyDef* def : children_of(path)) {
      const Node::Entry* entry = find_entry(node, def->name());
      const bool applies = applicable && holds(def->when);
      if (entry != nullptr && !applies) {
        if (!switched_off_by_override(*def, *entry))
          not_applicable(*def, *entry);
        entry = nullptr;
      }
      if (def->type == Type::section) {
        section(def->path, entry != nullptr ? &entry->value : nullptr, applies, anchor);
      } else if (!applies) {
        continue;
      } else if (def->type == Type::records) {
        records(*def, entry, node, anchor);
      } else {
        leaf(*def, entry, node, anchor);
      }
    }
  }

  // A value or its default; returns false when the key is left to a preset.
  bool value_or_default(const KeyDef& def, const Node::Entry* entry, const Node* parent,
                        const Node* anchor, const std::string& field, Resolved& out) const {
    if (entry != nullptr) {
      out = parse_value(def, entry->value, field);
      out.key = def.path;
      if (entry->value.kind == Node::Kind::null)
        out.loc = entry->key_loc;
      return true;
    }
    out.key = def.path;
    out.loc = parent != nullptr ? parent->loc : file_only();
    switch (def.default_kind) {
      case DefaultKind::value:
        out.value = def.default_value;
        return true;
      case DefaultKind::required:
        missing(def, anchor, field, missing_reason(def));
      case DefaultKind::preset: {
        // Giving any shape key means "my own model", so the default preset steps aside.
        bool explicit_shape = false;
        if (parent != nullptr) {
          for (const Node::Entry& e : parent->entries) {
            const KeyDef* sibling = find_key(join(def.parent(), e.key));
            explicit_shape = explicit_shape || (sibling != nullptr && sibling->defines_shape);
          }
        }
        if (!explicit_shape)
          out.value = def.default_value;
        return true;
      }
      case DefaultKind::from_preset:
        if (has_preset(def.preset_key))
          return false;
        missing(def, anchor, field, missing_reason(def));
      case DefaultKind::from_preset_or_value:
        if (has_preset(def.preset_key))
          return false;
        out.value = def.default_value;
        return true;
    }
    return false;
  }

  void leaf(const KeyDef& def, const Node::Entry* entry, const Node* parent, const Node* anchor) {
    Resolved r;
    if (value_or_default(def, entry, parent, anchor, def.path, r)) {
      out_.values.push_back(std::move(r));
    }
  }

  void records(const KeyDef& def, const Node::Entry* entry, const Node* parent,
               const Node* anchor) {
    Resolved r;
    r.key = def.path;
    r.loc = parent != nullptr ? parent->loc : file_only();
    if (entry == nullptr || entry->value.kind == Node::Kind::null) {
      if (def.default_kind == DefaultKind::required) {
        missing(def, anchor, def.path, missing_reason(def));
      }
      if (entry != nullptr)
        r.loc = entry->key_loc;
      out_.values.push_back(std::move(r));
      return;
    }
    const Node& list = entry->value;
    r.loc = list.loc;
    r.given = true;
    if (list.kind != Node::Kind::list) {
      fail(list.loc, def.path, expected_found("a list of mappings", describe(list)));
    }
    for (std::size_t i = 0; i < list.items.size(); ++i) {
      const Node& item = list.items[i];
      const std::string prefix = fmt::format("{}[{}]", def.path, i);
      if (item.kind != Node::Kind::map)
        fail(item.loc, prefix, expected_found("a mapping", describe(item)));
      check_unknown(def.path, prefix, item);
      std::vector<Resolved> row;
      for (const KeyDef* child : children_of(def.path)) {
        Resolved cell;
        value_or_default(*child, find_entry(&item, child->name()), &item, &item,
                         prefix + "." + child->name(), cell);
        row.push_back(std::move(cell));
      }
      r.item_locs.push_back(item.loc);
      r.records.push_back(std::move(row));
    }
    out_.values.push_back(std::move(r));
  }

  Resolution out_;
};

}  // namespace

const Resolved* Resolution::get(std::string_view path) const {
  for (const Resolved& r : values) {
    if (r.key == path)
      return &r;
  }
  return nullptr;
}

SourceLocation Resolution::where(std::string_view path) const {
  const Resolved* r = get(path);
  SourceLocation loc = r != nullptr ? r->loc : SourceLocation{source, 0, 0, ""};
  loc.field = std::string(path);
  return loc;
}

Resolution resolve_tree(const Node& root, const std::string& source) {
  return Resolver(source).run(root);
}

void set_path(Node& root, const std::string& path, Node value, const SourceLocation& key_loc) {
  Node* node = &root;
  std::string parent;
  std::size_t start = 0;
  while (true) {
    const std::size_t dot = path.find('.', start);
    const std::string name = path.substr(start, dot == std::string::npos ? dot : dot - start);
    const std::string here = join(parent, name);
    const KeyDef* def = find_key(here);
    if (def == nullptr || name.empty()) {
      const std::vector<std::string> names = child_names(parent);
      const std::string near = nearest_match(name, names);
      const std::string hint =
          near.empty() ? "expected " + one_of(names) : fmt::format("did you mean \"{}\"?", near);
      fail(key_loc, path, fmt::format("unknown key \"{}\"; {}", name, hint));
    }
    // A section the file left empty becomes one; a list or a value the file gave where a
    // section belongs stays the file's error, not silently replaced by the command line's key.
    if (node->kind == Node::Kind::scalar || node->kind == Node::Kind::list) {
      SourceLocation at = node->loc;
      at.field = parent;
      throw InputError(at, expected_found("a mapping", describe(*node)));
    }
    if (node->kind != Node::Kind::map) {
      *node = Node{};
      node->kind = Node::Kind::map;
      node->loc = key_loc;
    }
    Node* child = node->find(name);
    if (dot == std::string::npos) {
      if (child != nullptr) {
        // The key is now the command line's: a key that no longer applies is then an error
        // naming --set, not a file key silently dropped. (`child` is that entry's value.)
        for (Node::Entry& entry : node->entries) {
          if (&entry.value == child)
            entry.key_loc = key_loc;
        }
        *child = std::move(value);
      } else {
        node->entries.push_back(Node::Entry{name, key_loc, std::move(value)});
      }
      return;
    }
    if (def->type != Type::section) {
      fail(key_loc, path,
           fmt::format("\"{}\" is {}, not a section; set it as a whole", here, type_name(*def)));
    }
    if (child == nullptr) {
      Node section;
      section.kind = Node::Kind::map;
      section.loc = key_loc;
      node->entries.push_back(Node::Entry{name, key_loc, std::move(section)});
      child = &node->entries.back().value;
    }
    node = child;
    parent = here;
    start = dot + 1;
  }
}

void apply_override(Node& root, const std::string& assignment) {
  const std::size_t eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0) {
    throw InputError(SourceLocation{"--set", 0, 0, ""},
                     expected_found("key.path=value", fmt::format("\"{}\"", assignment)));
  }
  const std::string path = assignment.substr(0, eq);
  const SourceLocation here{"--set", 0, 0, ""};
  Node value = parse_override_value(assignment.substr(eq + 1), path);
  expand_override_path(value, path);
  set_path(root, path, std::move(value), here);
  // cluster.replicas and cluster.groups are exclusive in a file; setting one from the command
  // line replaces the other, as a later assignment replaces an earlier one.
  const std::string other = path == "cluster.replicas" ? "groups"
                            : path == "cluster.groups" ? "replicas"
                                                       : "";
  if (Node* cluster = root.find("cluster"); cluster != nullptr && !other.empty()) {
    std::erase_if(cluster->entries, [&](const Node::Entry& e) { return e.key == other; });
  }
}

namespace {

void apply_overlay_at(Node& root, const Node& section, const std::string& prefix) {
  for (const Node::Entry& entry : section.entries) {
    const std::string path = join(prefix, entry.key);
    const KeyDef* def = find_key(path);
    if (def != nullptr && def->type == Type::section && entry.value.kind == Node::Kind::map) {
      apply_overlay_at(root, entry.value, path);
    } else {
      set_path(root, path, entry.value, entry.key_loc);
    }
  }
}

}  // namespace

void apply_overlay(Node& root, const Node& overlay) {
  if (overlay.kind == Node::Kind::null)
    return;
  if (overlay.kind != Node::Kind::map) {
    SourceLocation at = overlay.loc;
    throw InputError(at, expected_found("a mapping of scenario sections", describe(overlay)));
  }
  apply_overlay_at(root, overlay, "");
}

}  // namespace exitsim::scenario::detail
