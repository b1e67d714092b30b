#include "values.hpp"

#include <fmt/format.h>

#include <charconv>
#include <cmath>

#include "exitsim/core/suggest.hpp"

namespace exitsim::scenario::detail {
namespace {

std::optional<std::int64_t> parse_integer(const std::string& text) {
  const char* first = text.data();
  const char* last = text.data() + text.size();
  if (first != last && *first == '+')
    ++first;
  std::int64_t value = 0;
  const auto [end, ec] = std::from_chars(first, last, value);
  if (ec != std::errc{} || end != last || first == last)
    return std::nullopt;
  return value;
}

std::optional<double> parse_number(const std::string& text) {
  const char* first = text.data();
  const char* last = text.data() + text.size();
  if (first != last && *first == '+')
    ++first;
  double value = 0;
  const auto [end, ec] = std::from_chars(first, last, value);
  // Infinities and NaN are never meaningful settings; from_chars would accept "inf" and "nan".
  if (ec != std::errc{} || end != last || first == last || !std::isfinite(value)) {
    return std::nullopt;
  }
  return value;
}

bool is_identifier(const std::string& text) {
  if (text.empty() || std::isdigit(static_cast<unsigned char>(text.front())))
    return false;
  for (char c : text) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_')
      return false;
  }
  return true;
}

bool in_range(const Range& r, double x) {
  if (r.min && (r.min_open ? x <= *r.min : x < *r.min))
    return false;
  if (r.max && (r.max_open ? x >= *r.max : x > *r.max))
    return false;
  return true;
}

std::string bound_text(double x, bool integer) {
  return integer ? fmt::format("{}", static_cast<std::int64_t>(x)) : format_number(x);
}

std::string range_text(const Range& r, bool integer) {
  if (r.min && r.max) {
    return fmt::format("{}{}, {}{}", r.min_open ? "(" : "[", bound_text(*r.min, integer),
                       bound_text(*r.max, integer), r.max_open ? ")" : "]");
  }
  if (r.min)
    return fmt::format("{} {}", r.min_open ? ">" : ">=", bound_text(*r.min, integer));
  if (r.max)
    return fmt::format("{} {}", r.max_open ? "<" : "<=", bound_text(*r.max, integer));
  return "";
}

bool has_range(const Range& r) {
  return r.min.has_value() || r.max.has_value();
}

std::string with_range(const std::string& noun, const Range& r, bool integer) {
  if (!has_range(r))
    return noun;
  const std::string text = range_text(r, integer);
  return text.front() == '[' || text.front() == '(' ? noun + " in " + text : noun + " " + text;
}

bool is_integer_type(Type t) {
  return t == Type::integer || t == Type::integer_list;
}

[[noreturn]] void fail(const Node& node, const std::string& field, const std::string& message) {
  SourceLocation where = node.loc;
  where.field = field;
  throw InputError(where, message);
}

std::int64_t integer_item(const KeyDef& def, const Node& node, const std::string& field) {
  const auto value = node.kind == Node::Kind::scalar ? parse_integer(node.scalar) : std::nullopt;
  if (!value)
    fail(node, field, expected_found("an integer", describe(node)));
  if (!in_range(def.range, static_cast<double>(*value))) {
    fail(node, field, expected_found(with_range("an integer", def.range, true), node.scalar));
  }
  return *value;
}

double number_item(const KeyDef& def, const Node& node, const std::string& field) {
  const auto value = node.kind == Node::Kind::scalar ? parse_number(node.scalar) : std::nullopt;
  if (!value)
    fail(node, field, expected_found("a number", describe(node)));
  if (!in_range(def.range, *value)) {
    fail(node, field, expected_found(with_range("a number", def.range, false), node.scalar));
  }
  return *value;
}

template <typename T, typename Item>
std::vector<T> list_items(const KeyDef& def, const Node& node, const std::string& field,
                          Resolved& out, Item item) {
  if (node.kind != Node::Kind::list)
    fail(node, field, expected_found(expected_text(def), describe(node)));
  std::vector<T> values;
  for (std::size_t i = 0; i < node.items.size(); ++i) {
    values.push_back(item(def, node.items[i], fmt::format("{}[{}]", field, i)));
    out.item_locs.push_back(node.items[i].loc);
  }
  return values;
}

}  // namespace

Resolved parse_value(const KeyDef& def, const Node& node, const std::string& field) {
  Resolved out;
  out.key = def.path;
  out.loc = node.loc;
  out.given = true;
  if (node.kind == Node::Kind::null) {
    if (!def.nullable)
      fail(node, field, expected_found(expected_text(def), "null"));
    return out;
  }
  switch (def.type) {
    case Type::integer:
      out.value = integer_item(def, node, field);
      break;
    case Type::number:
      out.value = number_item(def, node, field);
      break;
    case Type::boolean:
      if (node.kind == Node::Kind::scalar && (node.scalar == "true" || node.scalar == "false")) {
        out.value = node.scalar == "true";
      } else {
        fail(node, field, expected_found("true or false", describe(node)));
      }
      break;
    case Type::string:
      if (node.kind != Node::Kind::scalar)
        fail(node, field, expected_found("a string", describe(node)));
      out.value = node.scalar;
      break;
    case Type::enumeration: {
      if (node.kind == Node::Kind::scalar) {
        for (const std::string& allowed : def.allowed) {
          if (allowed == node.scalar)
            out.value = node.scalar;
        }
        if (std::holds_alternative<std::string>(out.value))
          break;
      }
      std::string message = expected_found(expected_text(def), describe(node));
      if (node.kind == Node::Kind::scalar) {
        const std::string near = nearest_match(node.scalar, def.allowed);
        if (!near.empty())
          message += fmt::format("; did you mean \"{}\"?", near);
      }
      fail(node, field, message);
    }
    case Type::identifier:
      if (node.kind != Node::Kind::scalar || !is_identifier(node.scalar)) {
        fail(node, field, expected_found(expected_text(def), describe(node)));
      }
      out.value = node.scalar;
      break;
    case Type::integer_list:
      out.value = list_items<std::int64_t>(def, node, field, out, integer_item);
      break;
    case Type::number_list:
      out.value = list_items<double>(def, node, field, out, number_item);
      break;
    case Type::scalar_list: {
      const auto item = [](const KeyDef&, const Node& n, const std::string& f) {
        if (n.kind == Node::Kind::null)
          return std::string("null");
        if (n.kind != Node::Kind::scalar)
          fail(n, f, expected_found("a single value", describe(n)));
        return n.scalar;
      };
      out.value = list_items<std::string>(def, node, field, out, item);
      if (node.items.empty())
        fail(node, field, expected_found("a non-empty list", "[]"));
      break;
    }
    case Type::string_list: {
      const auto item = [](const KeyDef&, const Node& n, const std::string& f) {
        if (n.kind != Node::Kind::scalar)
          fail(n, f, expected_found("a string", describe(n)));
        return n.scalar;
      };
      out.value = list_items<std::string>(def, node, field, out, item);
      break;
    }
    case Type::section:
    case Type::records:
      break;
  }
  return out;
}

std::string expected_text(const KeyDef& def) {
  std::string text;
  switch (def.type) {
    case Type::integer:
      text = with_range("an integer", def.range, true);
      break;
    case Type::number:
      text = with_range("a number", def.range, false);
      break;
    case Type::boolean:
      text = "true or false";
      break;
    case Type::string:
      text = "a string";
      break;
    case Type::enumeration:
      text = one_of(def.allowed);
      break;
    case Type::identifier:
      text = "an identifier (letters, digits and _)";
      break;
    case Type::integer_list:
      text = has_range(def.range) ? "a list of integers " + range_text(def.range, true)
                                  : "a list of integers";
      break;
    case Type::number_list:
      text = has_range(def.range) ? "a list of numbers " + range_text(def.range, false)
                                  : "a list of numbers";
      break;
    case Type::scalar_list:
      text = "a list of values";
      break;
    case Type::string_list:
      text = "a list of strings";
      break;
    case Type::section:
      text = "a mapping";
      break;
    case Type::records:
      text = "a list of mappings";
      break;
  }
  return def.nullable ? text + " or null" : text;
}

std::string type_name(const KeyDef& def) {
  std::string name;
  switch (def.type) {
    case Type::section:
      name = "section";
      break;
    case Type::integer:
      name = "integer";
      break;
    case Type::number:
      name = "number";
      break;
    case Type::boolean:
      name = "boolean";
      break;
    case Type::string:
      name = "string";
      break;
    case Type::enumeration:
      name = "enum";
      break;
    case Type::identifier:
      name = "identifier";
      break;
    case Type::integer_list:
      name = "list of integers";
      break;
    case Type::number_list:
      name = "list of numbers";
      break;
    case Type::scalar_list:
      name = "list of values";
      break;
    case Type::string_list:
      name = "list of strings";
      break;
    case Type::records:
      name = "list of mappings";
      break;
  }
  return def.nullable ? name + " or null" : name;
}

std::string allowed_text(const KeyDef& def) {
  switch (def.type) {
    case Type::enumeration: {
      std::string text;
      for (const std::string& v : def.allowed)
        text += (text.empty() ? "" : ", ") + v;
      return text;
    }
    case Type::identifier: {
      std::string text = "built in: ";
      for (std::size_t i = 0; i < def.allowed.size(); ++i) {
        text += (i > 0 ? ", " : "") + def.allowed[i];
      }
      return text + "; or a registered name";
    }
    default:
      return range_text(def.range, is_integer_type(def.type));
  }
}

std::string format_number(double x) {
  return fmt::format("{}", x);
}

std::string format_string(const std::string& text) {
  static const std::vector<std::string> k_special = {
      "null",  "Null",  "NULL", "~",  "true", "True", "TRUE", "false",
      "False", "FALSE", "yes",  "no", "on",   "off",  "y",    "n"};
  bool plain = !text.empty() && text.back() != ' ';
  for (std::size_t i = 0; plain && i < text.size(); ++i) {
    const char c = text[i];
    const bool safe = std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' ||
                      c == '/' || (i > 0 && (c == '-' || c == '+' || c == ' '));
    plain = safe;
  }
  for (const std::string& word : k_special) {
    if (text == word)
      plain = false;
  }
  if (plain)
    return text;
  std::string out = "\"";
  for (char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        out += c;
    }
  }
  return out + "\"";
}

std::string format_value(const Value& value) {
  struct Visitor {
    std::string operator()(std::monostate) const { return "null"; }
    std::string operator()(bool b) const { return b ? "true" : "false"; }
    std::string operator()(std::int64_t x) const { return fmt::format("{}", x); }
    std::string operator()(double x) const { return format_number(x); }
    std::string operator()(const std::string& s) const { return format_string(s); }
    std::string operator()(const std::vector<std::int64_t>& xs) const {
      return fmt::format("[{}]", fmt::join(xs, ", "));
    }
    std::string operator()(const std::vector<double>& xs) const {
      std::vector<std::string> parts;
      for (double x : xs)
        parts.push_back(format_number(x));
      return fmt::format("[{}]", fmt::join(parts, ", "));
    }
    std::string operator()(const std::vector<std::string>& xs) const {
      std::vector<std::string> parts;
      for (const std::string& x : xs)
        parts.push_back(x == "null" ? x : format_string(x));
      return fmt::format("[{}]", fmt::join(parts, ", "));
    }
  };
  return std::visit(Visitor{}, value);
}

std::string canonical_text(const Value& value) {
  if (const auto* s = std::get_if<std::string>(&value))
    return *s;
  return format_value(value);
}

}  // namespace exitsim::scenario::detail
