#include "exitsim/sim/metrics/latency_sketch.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "exitsim/core/nearest_rank.hpp"

namespace exitsim::sim {
namespace {

// 2^64 as a long double, for turning the two halves of the 128-bit sum into one number.
constexpr long double k_two_to_64 = 18446744073709551616.0L;

// GCC's and Clang's 128-bit integer (__extension__: not ISO C++, so -Wpedantic would object).
__extension__ typedef unsigned __int128 Uint128;

}  // namespace

LatencySketch::LatencySketch(double relative_error) : relative_error_(relative_error) {
  if (!(relative_error >= k_min_relative_error && relative_error <= k_max_relative_error)) {
    throw std::invalid_argument(
        fmt::format("LatencySketch: relative error must be in [{}, {}], got {}",
                    k_min_relative_error, k_max_relative_error, relative_error));
  }
  gamma_ = (1 + relative_error) / (1 - relative_error);
  log_gamma_ = std::log(gamma_);
}

int LatencySketch::bucket_of(TimeNs value) const {
  // value >= 1, so the index is >= 0 and below log(2^63) / log(gamma) < 2^31.
  return static_cast<int>(std::ceil(std::log(static_cast<double>(value)) / log_gamma_));
}

double LatencySketch::bucket_value(int index) const {
  return 2 * std::exp(static_cast<double>(index) * log_gamma_) / (gamma_ + 1);
}

void LatencySketch::cover(int lo, int hi) {
  if (counts_.empty()) {
    first_bucket_ = lo;
    counts_.assign(static_cast<std::size_t>(hi - lo + 1), 0);
    return;
  }
  const int last = first_bucket_ + static_cast<int>(counts_.size()) - 1;
  if (lo < first_bucket_) {
    counts_.insert(counts_.begin(), static_cast<std::size_t>(first_bucket_ - lo), 0);
    first_bucket_ = lo;
  }
  if (hi > last)
    counts_.resize(counts_.size() + static_cast<std::size_t>(hi - last), 0);
}

void LatencySketch::add(TimeNs value) {
  add(value, 1);
}

void LatencySketch::add(TimeNs value, std::int64_t count) {
  if (count < 0)
    throw std::invalid_argument(fmt::format("LatencySketch: negative count {}", count));
  if (count == 0)
    return;
  if (value < 0)
    throw std::invalid_argument(fmt::format("LatencySketch: negative duration {} ns", value));
  if (count_ == 0) {
    min_ = value;
    max_ = value;
  } else {
    min_ = std::min(min_, value);
    max_ = std::max(max_, value);
  }
  count_ += count;
  // The 128-bit sum grows by value x count (each below 2^63, so the product fits 126 bits).
  const Uint128 added = static_cast<Uint128>(value) * static_cast<Uint128>(count);
  const auto low = static_cast<std::uint64_t>(added);
  sum_low_ += low;
  sum_high_ += static_cast<std::uint64_t>(added >> 64) + (sum_low_ < low ? 1 : 0);
  if (value == 0) {
    zero_count_ += count;
    return;
  }
  if (value != last_value_) {
    last_bucket_ = bucket_of(value);
    last_value_ = value;
  }
  const int index = last_bucket_;
  cover(index, index);
  counts_[static_cast<std::size_t>(index - first_bucket_)] += count;
}

void LatencySketch::merge(const LatencySketch& other) {
  if (other.relative_error_ != relative_error_) {
    throw std::invalid_argument(fmt::format("LatencySketch: cannot merge relative error {} into {}",
                                            other.relative_error_, relative_error_));
  }
  if (other.count_ == 0)
    return;
  if (count_ == 0) {
    min_ = other.min_;
    max_ = other.max_;
  } else {
    min_ = std::min(min_, other.min_);
    max_ = std::max(max_, other.max_);
  }
  count_ += other.count_;
  zero_count_ += other.zero_count_;
  sum_low_ += other.sum_low_;
  sum_high_ += other.sum_high_ + (sum_low_ < other.sum_low_ ? 1 : 0);
  if (other.counts_.empty())
    return;
  const int other_last = other.first_bucket_ + static_cast<int>(other.counts_.size()) - 1;
  cover(other.first_bucket_, other_last);
  const auto offset = static_cast<std::size_t>(other.first_bucket_ - first_bucket_);
  for (std::size_t i = 0; i < other.counts_.size(); ++i)
    counts_[offset + i] += other.counts_[i];
}

double LatencySketch::mean() const {
  if (count_ == 0)
    return 0;
  const long double sum =
      static_cast<long double>(sum_high_) * k_two_to_64 + static_cast<long double>(sum_low_);
  return static_cast<double>(sum / static_cast<long double>(count_));
}

double LatencySketch::quantile(double q) const {
  if (!(q >= 0 && q <= 1))
    throw std::invalid_argument(fmt::format("LatencySketch: quantile {} outside [0, 1]", q));
  if (count_ == 0)
    return 0;
  const std::int64_t rank = core::nearest_rank(q, count_);
  // The extremes are known exactly; reporting them keeps p0/p100 (and one-sample sketches) exact.
  if (rank == 1)
    return static_cast<double>(min_);
  if (rank == count_)
    return static_cast<double>(max_);
  std::int64_t seen = zero_count_;
  if (seen >= rank)
    return 0;
  for (std::size_t i = 0; i < counts_.size(); ++i) {
    seen += counts_[i];
    if (seen >= rank) {
      // Clamping to the exact extremes only moves the estimate towards the true value, which
      // lies between them.
      const double value = bucket_value(first_bucket_ + static_cast<int>(i));
      return std::clamp(value, static_cast<double>(min_), static_cast<double>(max_));
    }
  }
  return static_cast<double>(max_);  // unreachable: the counts sum to count_
}

}  // namespace exitsim::sim
