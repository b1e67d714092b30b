#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>

namespace exitsim {

// An int64 that remembers whether any sum or product leading to it overflowed. Each user number
// is validated against its own range, but their products and sums can still leave int64 (a
// mixture's d_model x ffn_dim x experts x layers): computing through Checked turns such a wrap
// into a value that validation can refuse, naming the keys, instead of a negative size.
class Checked {
 public:
  // Implicit, so that a plain integer enters an expression as itself.
  constexpr Checked(std::int64_t value) : value_(value) {}

  bool overflowed() const { return overflowed_; }
  std::optional<std::int64_t> value() const {
    return overflowed_ ? std::nullopt : std::optional<std::int64_t>(value_);
  }
  // For sizes that validation has already bounded: an overflow here is a missing check.
  std::int64_t get(const char* what) const {
    if (overflowed_)
      throw std::logic_error(std::string(what) + ": past the int64 range (not validated)");
    return value_;
  }

  friend Checked operator*(Checked a, Checked b) {
    Checked out(0);
    out.overflowed_ =
        a.overflowed_ || b.overflowed_ || __builtin_mul_overflow(a.value_, b.value_, &out.value_);
    return out;
  }
  friend Checked operator+(Checked a, Checked b) {
    Checked out(0);
    out.overflowed_ =
        a.overflowed_ || b.overflowed_ || __builtin_add_overflow(a.value_, b.value_, &out.value_);
    return out;
  }
  friend Checked operator-(Checked a, Checked b) {
    Checked out(0);
    out.overflowed_ =
        a.overflowed_ || b.overflowed_ || __builtin_sub_overflow(a.value_, b.value_, &out.value_);
    return out;
  }
  Checked& operator+=(Checked other) { return *this = *this + other; }

 private:
  std::int64_t value_;
  bool overflowed_ = false;
};

}  // namespace exitsim
