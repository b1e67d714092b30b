#pragma once

#include <string>
#include <utility>
#include <vector>

#include "exitsim/core/dtype.hpp"
#include "exitsim/core/model_shape.hpp"
#include "schema.hpp"

namespace exitsim::scenario::detail {

// Fluent construction of schema rows, so each section file reads as a table.
class Key {
 public:
  Key(std::string path, Type type, std::string doc) {
    def_.path = std::move(path);
    def_.type = type;
    def_.doc = std::move(doc);
  }
  Key& def(Value v) {
    def_.default_kind = DefaultKind::value;
    def_.default_value = std::move(v);
    return *this;
  }
  Key& required() {
    def_.default_kind = DefaultKind::required;
    return *this;
  }
  Key& input_path() {
    def_.input_path = true;
    return *this;
  }
  Key& preset(std::string name) {
    def_.default_kind = DefaultKind::preset;
    def_.default_value = std::move(name);
    def_.nullable = true;
    return *this;
  }
  Key& from_preset(std::string preset_key) {
    def_.default_kind = DefaultKind::from_preset;
    def_.preset_key = std::move(preset_key);
    return *this;
  }
  Key& from_preset_or(std::string preset_key, Value v) {
    def_.default_kind = DefaultKind::from_preset_or_value;
    def_.preset_key = std::move(preset_key);
    def_.default_value = std::move(v);
    return *this;
  }
  Key& range(std::optional<double> min, std::optional<double> max) {
    def_.range.min = min;
    def_.range.max = max;
    return *this;
  }
  Key& open_min() {
    def_.range.min_open = true;
    return *this;
  }
  Key& open_max() {
    def_.range.max_open = true;
    return *this;
  }
  Key& allowed(std::vector<std::string> values) {
    def_.allowed = std::move(values);
    return *this;
  }
  Key& nullable() {
    def_.nullable = true;
    return *this;
  }
  Key& when(std::string key, std::vector<std::string> values) {
    def_.when = Condition{std::move(key), std::move(values)};
    return *this;
  }
  Key& shape() {
    def_.defines_shape = true;
    return *this;
  }
  Key& shape_source() {
    def_.shape_source = true;
    def_.defines_shape = true;
    def_.nullable = true;
    return *this;
  }
  Key& bind(Binding b) {
    def_.bind = std::move(b);
    return *this;
  }
  operator KeyDef() const { return def_; }  // NOLINT: implicit, so tables are brace lists

 private:
  KeyDef def_;
};

// Conversions between Value and the Scenario's field types. The schema has already checked
// types and ranges, so the narrowing casts below cannot lose information.
inline void assign(std::int64_t& out, const Value& v) {
  out = std::get<std::int64_t>(v);
}
inline void assign(int& out, const Value& v) {
  out = static_cast<int>(std::get<std::int64_t>(v));
}
inline void assign(std::uint64_t& out, const Value& v) {
  out = static_cast<std::uint64_t>(std::get<std::int64_t>(v));
}
inline void assign(double& out, const Value& v) {
  out = std::get<double>(v);
}
inline void assign(bool& out, const Value& v) {
  out = std::get<bool>(v);
}
inline void assign(std::string& out, const Value& v) {
  out = std::get<std::string>(v);
}
inline void assign(std::optional<double>& out, const Value& v) {
  if (std::holds_alternative<double>(v)) {
    out = std::get<double>(v);
  } else {
    out.reset();
  }
}
inline void assign(std::vector<int>& out, const Value& v) {
  out.clear();
  for (std::int64_t x : std::get<std::vector<std::int64_t>>(v))
    out.push_back(static_cast<int>(x));
}
inline void assign(std::vector<double>& out, const Value& v) {
  out = std::get<std::vector<double>>(v);
}
inline void assign(std::vector<std::string>& out, const Value& v) {
  out = std::get<std::vector<std::string>>(v);
}
inline void assign(DType& out, const Value& v) {
  out = parse_dtype(std::get<std::string>(v)).value_or(DType::bf16);
}
inline void assign(MlpKind& out, const Value& v) {
  out = std::get<std::string>(v) == "plain" ? MlpKind::plain : MlpKind::gated;
}

inline Value to_value(std::int64_t x) {
  return x;
}
inline Value to_value(int x) {
  return std::int64_t{x};
}
inline Value to_value(std::uint64_t x) {
  return static_cast<std::int64_t>(x);
}
inline Value to_value(double x) {
  return x;
}
inline Value to_value(bool x) {
  return x;
}
inline Value to_value(const std::string& x) {
  return x;
}
inline Value to_value(const std::optional<double>& x) {
  return x ? Value{*x} : Value{std::monostate{}};
}
inline Value to_value(const std::vector<int>& x) {
  return std::vector<std::int64_t>(x.begin(), x.end());
}
inline Value to_value(const std::vector<double>& x) {
  return x;
}
inline Value to_value(const std::vector<std::string>& x) {
  return x;
}
inline Value to_value(DType x) {
  return std::string(to_string(x));
}
inline Value to_value(MlpKind x) {
  return std::string(x == MlpKind::plain ? "plain" : "gated");
}

// A value read back from a Scenario, for rendering.
inline Resolved loaded(Value v) {
  Resolved r;
  r.value = std::move(v);
  r.given = true;
  return r;
}

// Binds a key to the Scenario field reached through a chain of member pointers.
template <typename... Members>
Binding field(Members... members) {
  return Binding{
      [=](Scenario& s, const Resolved& r) { assign((s.*....*members), r.value); },
      [=](const Scenario& s) { return loaded(to_value((s.*....*members))); },
  };
}

// Finds the double x whose product with `scale` is exactly `stored`, so unit conversions
// (FLOP/s <-> TFLOP/s) survive a render/load round trip bit for bit.
double unscale(double stored, double scale);

// Binds a number key to a double Scenario field stored in other units: the key's value times
// `scale` (GB/s -> bytes/s), read back exactly (unscale).
template <typename... Members>
Binding scaled_field(double scale, Members... members) {
  return Binding{
      [=](Scenario& s, const Resolved& r) {
        (s.*....*members) = std::get<double>(r.value) * scale;
      },
      [=](const Scenario& s) { return loaded(unscale((s.*....*members), scale)); },
  };
}

}  // namespace exitsim::scenario::detail
