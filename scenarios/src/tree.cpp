#include "tree.hpp"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

namespace exitsim::scenario::detail {
namespace {

SourceLocation location(const std::string& file, const YAML::Mark& mark) {
  // yaml-cpp marks are 0-based; users and editors count from 1.
  return SourceLocation{file, mark.line + 1, mark.column + 1, ""};
}

Node convert(const YAML::Node& in, const std::string& file, const SourceLocation& fallback) {
  Node out;
  out.loc = file == "--set" ? fallback : location(file, in.Mark());
  switch (in.Type()) {
    case YAML::NodeType::Undefined:
    case YAML::NodeType::Null:
      // An empty value's mark points at the next token; the key's place reads better.
      out.loc = fallback;
      out.kind = Node::Kind::null;
      break;
    case YAML::NodeType::Scalar:
      out.kind = Node::Kind::scalar;
      out.scalar = in.Scalar();
      break;
    case YAML::NodeType::Sequence:
      out.kind = Node::Kind::list;
      for (const YAML::Node& item : in)
        out.items.push_back(convert(item, file, out.loc));
      break;
    case YAML::NodeType::Map:
      out.kind = Node::Kind::map;
      for (const auto& pair : in) {
        const SourceLocation key_loc =
            file == "--set" ? fallback : location(file, pair.first.Mark());
        if (!pair.first.IsScalar()) {
          throw InputError(key_loc, "expected a plain key, found a " +
                                        std::string(pair.first.IsMap() ? "mapping" : "list"));
        }
        const std::string key = pair.first.Scalar();
        for (const Node::Entry& earlier : out.entries) {
          if (earlier.key == key) {
            throw InputError(key_loc, fmt::format("duplicate key \"{}\" (first given on line {})",
                                                  key, earlier.key_loc.line));
          }
        }
        Node value = convert(pair.second, file, key_loc);
        out.entries.push_back(Node::Entry{key, key_loc, std::move(value)});
      }
      break;
  }
  return out;
}

}  // namespace

const Node* Node::find(std::string_view key) const {
  for (const Entry& e : entries) {
    if (e.key == key)
      return &e.value;
  }
  return nullptr;
}

Node* Node::find(std::string_view key) {
  for (Entry& e : entries) {
    if (e.key == key)
      return &e.value;
  }
  return nullptr;
}

std::string describe(const Node& node) {
  switch (node.kind) {
    case Node::Kind::null:
      return "null";
    case Node::Kind::list:
      return "a list";
    case Node::Kind::map:
      return "a mapping";
    case Node::Kind::scalar:
      break;
  }
  return fmt::format("\"{}\"", node.scalar);
}

Node parse_yaml(std::string_view text, const std::string& source_name) {
  std::vector<YAML::Node> documents;
  try {
    documents = YAML::LoadAll(std::string(text));
  } catch (const YAML::ParserException& e) {
    throw InputError(location(source_name, e.mark), e.msg);
  }
  if (documents.size() > 1) {
    throw InputError(SourceLocation{source_name, 0, 0, ""},
                     expected_found("one YAML document", std::to_string(documents.size())));
  }
  if (documents.empty()) {
    Node empty;
    empty.kind = Node::Kind::map;
    empty.loc = SourceLocation{source_name, 1, 1, ""};
    return empty;
  }
  const SourceLocation start{source_name, 1, 1, ""};
  Node root = convert(documents.front(), source_name, start);
  if (root.kind == Node::Kind::null) {
    root.kind = Node::Kind::map;
  } else if (root.kind != Node::Kind::map) {
    throw InputError(
        root.loc,
        expected_found("a mapping of scenario sections (name: ..., model: ...)", describe(root)));
  }
  return root;
}

Node parse_override_value(std::string_view text, const std::string& key_path) {
  const SourceLocation here{"--set", 0, 0, key_path};
  YAML::Node parsed;
  try {
    parsed = YAML::Load(std::string(text));
  } catch (const YAML::ParserException& e) {
    throw InputError(here, "invalid YAML value: " + e.msg);
  }
  SourceLocation loc = here;
  loc.field.clear();
  return convert(parsed, "--set", loc);
}

}  // namespace exitsim::scenario::detail
