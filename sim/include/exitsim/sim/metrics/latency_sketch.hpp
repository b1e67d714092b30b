#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "exitsim/core/time.hpp"

namespace exitsim::sim {

// A mergeable histogram of non-negative integer durations with relative-error quantiles.
//
// Bucket i >= 0 holds the values v with gamma^(i-1) < v <= gamma^i, gamma = (1 + a) / (1 - a),
// and reports them as 2 gamma^i / (gamma + 1); that value is within relative error a of every
// value in the bucket, so each quantile is within a of the true sample value of that rank. Zero
// has its own bucket and is reported exactly. Count, minimum, maximum and mean are exact (the sum
// is kept in 128 bits). Counts live in a dense vector spanning the lowest to the highest occupied
// bucket, so memory is bounded by the value range, not by the number of samples: at most
// log(2^63) / log(gamma) buckets, about 4,400 (35 KB) for the default a = 0.5%.
class LatencySketch {
 public:
  static constexpr double k_default_relative_error = 0.005;
  // Bounds on a: below the minimum the bucket vector could grow past ~4 MB.
  static constexpr double k_min_relative_error = 1e-4;
  static constexpr double k_max_relative_error = 0.5;

  // Throws std::invalid_argument unless a is in [k_min_relative_error, k_max_relative_error].
  explicit LatencySketch(double relative_error = k_default_relative_error);

  // Throws std::invalid_argument for a negative value.
  void add(TimeNs value);
  // Adds `value` `count` times (count >= 0): the same state as that many add(value) calls.
  void add(TimeNs value, std::int64_t count);
  // Adds every sample of `other`; throws std::invalid_argument when the relative errors differ.
  void merge(const LatencySketch& other);

  // The sample of nearest rank for q in [0, 1] (see nearest_rank), in ns, within relative error
  // a; q = 0 gives the exact minimum and q = 1 the exact maximum. 0 when empty. Throws
  // std::invalid_argument for q outside [0, 1].
  double quantile(double q) const;

  std::int64_t count() const { return count_; }
  bool empty() const { return count_ == 0; }
  TimeNs min() const { return count_ == 0 ? 0 : min_; }
  TimeNs max() const { return count_ == 0 ? 0 : max_; }
  // Exact up to the final division; 0 when empty.
  double mean() const;
  double relative_error() const { return relative_error_; }
  // Buckets currently allocated (the memory bound above applies to this).
  std::size_t bucket_count() const { return counts_.size(); }

 private:
  int bucket_of(TimeNs value) const;
  double bucket_value(int index) const;
  // Makes counts_ cover [lo, hi], keeping the counts already there.
  void cover(int lo, int hi);

  double relative_error_;
  double gamma_;
  double log_gamma_;
  std::int64_t count_ = 0;
  std::int64_t zero_count_ = 0;
  TimeNs min_ = 0;
  TimeNs max_ = 0;
  // The sum of all samples as a 128-bit unsigned integer (samples are below 2^63, so no count of
  // them that fits in int64 can overflow it).
  std::uint64_t sum_low_ = 0;
  std::uint64_t sum_high_ = 0;
  // The last value bucketed and its bucket: consecutive samples often repeat (every sequence of
  // an iteration waits the same gap), and a hit skips the logarithm.
  TimeNs last_value_ = 0;
  int last_bucket_ = 0;
  int first_bucket_ = 0;              // bucket index of counts_[0]
  std::vector<std::int64_t> counts_;  // counts of buckets first_bucket_ .. first_bucket_ + size - 1
};

}  // namespace exitsim::sim
