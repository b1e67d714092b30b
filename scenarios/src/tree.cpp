#include "tree.hpp"

#include <fmt/format.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/parser.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <optional>
#include <sstream>

namespace exitsim::scenario::detail {
namespace {

// Scenarios are small and flat; deeper nesting is a mistake or an attack, and is refused
// before yaml-cpp's own recursion gets deep (JSON inputs stop at 32 levels too).
constexpr std::size_t k_max_depth = 32;

// Builds Nodes from yaml-cpp's parse events rather than from YAML::Load's node graph, so that
// what the scenario format has no use for is refused while it is read, before it costs
// anything: anchors and aliases (an alias of its own mapping made the graph a cycle that
// recursed until the stack overflowed; nested aliases expand exponentially, 330 bytes to 4 GB)
// and nesting deeper than k_max_depth. Reuse is what cluster.groups and sweeps are for.
class TreeBuilder : public YAML::EventHandler {
 public:
  // file "--set": every node is at `start` (a --set value has no lines of its own).
  TreeBuilder(std::string file, SourceLocation start, SourceLocation error_place)
      : file_(std::move(file)), start_(std::move(start)), error_place_(std::move(error_place)) {}

  std::optional<Node>& root() { return root_; }

  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& mark, YAML::anchor_t) override {
    Node node;
    node.kind = Node::Kind::null;
    // An empty value's mark points at the next token; the key's place reads better.
    node.loc = null_location();
    add(std::move(node), mark);
  }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t) override {
    throw InputError(error_at(mark),
                     expected_found("a value written out",
                                    "an alias (*name): scenarios take no YAML anchors "
                                    "or aliases; repeat the value, or use "
                                    "cluster.groups or a sweep"));
  }
  void OnAnchor(const YAML::Mark& mark, const std::string& name) override {
    throw InputError(
        error_at(mark),
        expected_found("a value without an anchor",
                       "the anchor &" + name + ": scenarios take no YAML anchors or aliases"));
  }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                const std::string& value) override {
    Node node;
    node.kind = Node::Kind::scalar;
    node.scalar = value;
    node.loc = at(mark);
    add(std::move(node), mark);
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {
    open(Node::Kind::list, mark);
  }
  void OnSequenceEnd() override { close(); }
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {
    open(Node::Kind::map, mark);
  }
  void OnMapEnd() override { close(); }

 private:
  struct Open {
    Node node;
    bool expecting_key = true;  // a map's next node is a key
    YAML::Mark mark;
    std::string key;
    SourceLocation key_loc;
  };

  SourceLocation at(const YAML::Mark& mark) const {
    if (file_ == "--set")
      return start_;
    return SourceLocation{file_, mark.line + 1, mark.column + 1, ""};
  }

  // Where a refusal points: the place in the file, or the --set key path.
  SourceLocation error_at(const YAML::Mark& mark) const {
    if (file_ == "--set")
      return error_place_;
    // yaml-cpp marks are 0-based; users and editors count from 1.
    return SourceLocation{file_, mark.line + 1, mark.column + 1, ""};
  }

  SourceLocation null_location() const {
    if (stack_.empty())
      return start_;
    const Open& top = stack_.back();
    if (top.node.kind == Node::Kind::map && !top.expecting_key)
      return top.key_loc;
    return top.node.loc;
  }

  void open(Node::Kind kind, const YAML::Mark& mark) {
    if (stack_.size() >= k_max_depth) {
      throw InputError(error_at(mark),
                       expected_found(fmt::format("at most {} levels of nesting", k_max_depth),
                                      "deeper nesting"));
    }
    Open entry;
    entry.node.kind = kind;
    entry.node.loc = at(mark);
    entry.mark = mark;
    stack_.push_back(std::move(entry));
  }

  void close() {
    Open done = std::move(stack_.back());
    stack_.pop_back();
    add(std::move(done.node), done.mark);
  }

  void add(Node node, const YAML::Mark& mark) {
    if (stack_.empty()) {
      root_ = std::move(node);
      return;
    }
    Open& top = stack_.back();
    if (top.node.kind == Node::Kind::list) {
      top.node.items.push_back(std::move(node));
      return;
    }
    if (!top.expecting_key) {
      top.node.entries.push_back(Node::Entry{top.key, top.key_loc, std::move(node)});
      top.expecting_key = true;
      return;
    }
    const SourceLocation key_loc = at(mark);
    if (node.kind != Node::Kind::scalar)
      throw InputError(key_loc, expected_found("a plain key", describe(node)));
    for (const Node::Entry& earlier : top.node.entries) {
      if (earlier.key == node.scalar) {
        throw InputError(key_loc, fmt::format("duplicate key \"{}\" (first given on line {})",
                                              node.scalar, earlier.key_loc.line));
      }
    }
    top.key = std::move(node.scalar);
    top.key_loc = key_loc;
    top.expecting_key = false;
  }

  std::string file_;
  SourceLocation start_;
  SourceLocation error_place_;
  std::vector<Open> stack_;
  std::optional<Node> root_;
};

// Parses `text` as exactly one YAML document (none: nullopt) into Nodes.
std::optional<Node> parse_one_document(std::string_view text, const std::string& file,
                                       const SourceLocation& start,
                                       const SourceLocation& error_place) {
  // YAML allows no NUL byte, and yaml-cpp misreads one: a leading NUL made the file UTF-16, a
  // later one an "unknown escape character", and one inside quotes was kept in the value.
  if (const std::size_t nul = text.find('\0'); nul != std::string_view::npos) {
    SourceLocation where = error_place;
    if (file != "--set") {
      const std::string_view before = text.substr(0, nul);
      const std::size_t line_start = before.rfind('\n');
      where = SourceLocation{
          file, static_cast<std::int64_t>(std::count(before.begin(), before.end(), '\n')) + 1,
          static_cast<std::int64_t>(line_start == std::string_view::npos ? nul + 1
                                                                         : nul - line_start),
          ""};
    }
    throw InputError(where, expected_found("YAML text", "a NUL byte"));
  }
  std::istringstream stream{std::string(text)};
  YAML::Parser parser(stream);
  TreeBuilder builder(file, start, error_place);
  try {
    if (!parser.HandleNextDocument(builder))
      return std::nullopt;
    // A second document is refused without being kept (yaml-cpp's LoadAll never ended on a
    // stray leading comma, appending empty documents until memory ran out).
    TreeBuilder rest(file, start, error_place);
    if (parser.HandleNextDocument(rest)) {
      throw InputError(error_place, expected_found("one YAML document",
                                                   "more than one (a \"---\" or a stray "
                                                   "leading \",\" starts another)"));
    }
  } catch (const YAML::ParserException& e) {
    SourceLocation where = error_place;
    if (file != "--set")
      where = SourceLocation{file, e.mark.line + 1, e.mark.column + 1, ""};
    // yaml-cpp's own words ("end of map flow not found") name the fault, not what was wanted.
    throw InputError(
        where, expected_found(file == "--set" ? "a well-formed YAML value" : "well-formed YAML",
                              "a syntax error (" + e.msg + ")"));
  }
  return std::move(builder.root());
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
  const SourceLocation start{source_name, 1, 1, ""};
  std::optional<Node> document =
      parse_one_document(text, source_name, start, SourceLocation{source_name, 0, 0, ""});
  if (!document) {
    Node empty;
    empty.kind = Node::Kind::map;
    empty.loc = start;
    return empty;
  }
  Node root = std::move(*document);
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
  SourceLocation loc = here;
  loc.field.clear();
  std::optional<Node> value = parse_one_document(text, "--set", loc, here);
  if (!value) {
    Node null;
    null.loc = loc;
    return null;
  }
  return std::move(*value);
}

}  // namespace exitsim::scenario::detail
