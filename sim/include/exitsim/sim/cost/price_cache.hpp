#pragma once

// The one rule for the roofline's price cache (docs/cost_model.md, "Speed"): a price computed
// once for a count stands in for pricing a batch only where the op reads nothing but that count.

#include <array>
#include <cstddef>
#include <initializer_list>

#include "exitsim/sim/cost/stack_work.hpp"

namespace exitsim::sim {

struct OpParams;

// Which batches a table of prices by count answers for, and which ops it may hold. A batch
// `x` is in the key when its `keyed` features all hold one integer count below the table's rows
// and its `zero` features are all 0; an op is covered when all it reads (its launch condition and
// its terms; a mixture's routed weights read the token count) is among those features. A covered
// op's price at a batch in the key is then its price at the row's features, so a row filled by
// the pricing code itself holds the very doubles a lookup replaces.
class PriceTableKey {
 public:
  static constexpr std::size_t k_max_features = 2;

  // Throws std::logic_error past k_max_features of either kind or with no keyed feature.
  PriceTableKey(std::initializer_list<BatchFeature> keyed,
                std::initializer_list<BatchFeature> zero);

  bool covers(const OpParams& op) const;
  // The batch of row `count`: the count on every keyed feature, 0 elsewhere.
  BatchFeatures row_features(std::size_t count) const;
  // The row of `x` in a table of `rows` rows; false when x is outside the key.
  bool row_of(const BatchFeatures& x, std::size_t rows, std::size_t& row) const {
    const double count = x[feature_index(keyed_[0])];
    if (!(count >= 0 && count < static_cast<double>(rows)) ||
        static_cast<double>(static_cast<std::size_t>(count)) != count)
      return false;
    for (std::size_t i = 1; i < keyed_count_; ++i) {
      if (x[feature_index(keyed_[i])] != count)
        return false;
    }
    for (std::size_t i = 0; i < zero_count_; ++i) {
      if (x[feature_index(zero_[i])] != 0)
        return false;
    }
    row = static_cast<std::size_t>(count);
    return true;
  }

 private:
  bool reads(BatchFeature f) const;

  std::array<BatchFeature, k_max_features> keyed_{};
  std::size_t keyed_count_ = 0;
  std::array<BatchFeature, k_max_features> zero_{};
  std::size_t zero_count_ = 0;
};

}  // namespace exitsim::sim
