#include "exitsim/sim/cost/price_cache.hpp"

#include <algorithm>
#include <stdexcept>

#include "exitsim/sim/cost/roofline.hpp"

namespace exitsim::sim {

PriceTableKey::PriceTableKey(std::initializer_list<BatchFeature> keyed,
                             std::initializer_list<BatchFeature> zero) {
  if (keyed.size() == 0 || keyed.size() > k_max_features || zero.size() > k_max_features)
    throw std::logic_error("PriceTableKey: one or two keyed features, at most two zero ones");
  std::copy(keyed.begin(), keyed.end(), keyed_.begin());
  keyed_count_ = keyed.size();
  std::copy(zero.begin(), zero.end(), zero_.begin());
  zero_count_ = zero.size();
}

bool PriceTableKey::reads(BatchFeature f) const {
  // `never` is 0 in every batch: an op launched on it (one a layer lacks) reads nothing.
  const auto in = [f](const auto& list, std::size_t count) {
    return std::find(list.begin(), list.begin() + static_cast<std::ptrdiff_t>(count), f) !=
           list.begin() + static_cast<std::ptrdiff_t>(count);
  };
  return f == BatchFeature::never || in(keyed_, keyed_count_) || in(zero_, zero_count_);
}

bool PriceTableKey::covers(const OpParams& op) const {
  // A mixture's expert load and routed weights read the token count whatever its terms.
  const bool reads_tokens = op.expert_imbalance != 0 || op.routed_weight_bytes != 0;
  if (!reads(op.launch_if) || (op.ns_per_unit != 0 && !reads(op.timed_feature)) ||
      (reads_tokens && !reads(BatchFeature::tokens)))
    return false;
  for (std::size_t t = 0; t < op.used_terms; ++t) {
    if (!reads(op.terms[t].feature))
      return false;
  }
  return true;
}

BatchFeatures PriceTableKey::row_features(std::size_t count) const {
  BatchFeatures x{};
  for (std::size_t i = 0; i < keyed_count_; ++i)
    x[feature_index(keyed_[i])] = static_cast<double>(count);
  return x;
}

}  // namespace exitsim::sim
