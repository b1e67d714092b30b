// The one rule of the roofline's price cache (PriceTableKey): a price computed once for a count
// stands in for pricing a batch only where the op reads nothing but the key's features, and only
// for batches whose keyed features hold that count and whose zero features are 0. That a lookup
// then gives the pricing's own doubles is held by CostSyncReference (the fast iteration_cost
// against the op-by-op reference).
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <limits>

#include "exitsim/sim/cost/price_cache.hpp"
#include "exitsim/sim/cost/roofline.hpp"

namespace exitsim::sim {
namespace {

constexpr std::size_t at(BatchFeature f) {
  return static_cast<std::size_t>(f);
}

// A projection: launched by tokens, FLOPs and bytes per token.
OpParams projection() {
  OpParams op;
  op.launch_if = BatchFeature::tokens;
  op.add(BatchFeature::tokens, 2.0 * 4096 * 4096, 2.0 * 4096);
  op.fixed_bytes = 2.0 * 4096 * 4096;
  return op;
}

TEST(CostPriceCache, AKeyCoversTheOpsThatReadOnlyItsFeaturesAndTheBatchesThatHoldItsCount) {
  // The layer ops' key: the token count, with the K/V reuse features 0 (outside shared_kv).
  const PriceTableKey tokens({BatchFeature::tokens},
                             {BatchFeature::kv_reuse_tokens, BatchFeature::kv_reuse_all});
  EXPECT_TRUE(tokens.covers(projection()));
  // A K/V projection skipped by reusing tokens: its negative term reads a zero feature, 0 at
  // every batch in the key, so its price there is still the row's.
  OpParams kv = projection();
  kv.add(BatchFeature::kv_reuse_tokens, -2.0 * 4096 * 1024, -2.0 * 1024);
  EXPECT_TRUE(tokens.covers(kv));
  // An op a layer lacks is launched on `never`, always 0: it reads nothing.
  OpParams missing;
  missing.launch_if = BatchFeature::never;
  EXPECT_TRUE(tokens.covers(missing));
  // Attention reads the context (decode_kv): outside the key.
  OpParams attention = projection();
  attention.add(BatchFeature::decode_kv, 2.0 * 4096, 2.0 * 1024);
  EXPECT_FALSE(tokens.covers(attention));
  // Launched by decode sequences, or timed per decode sequence: outside the key too.
  OpParams decode_launch = projection();
  decode_launch.launch_if = BatchFeature::decode_seqs;
  EXPECT_FALSE(tokens.covers(decode_launch));
  OpParams floor_per_sequence = projection();
  floor_per_sequence.timed_feature = BatchFeature::decode_seqs;
  floor_per_sequence.ns_per_unit = 10;
  EXPECT_FALSE(tokens.covers(floor_per_sequence));
  // A mixture's routed weights depend on the token count whatever its terms: inside the token
  // key, outside the K/V-only key.
  OpParams routed = projection();
  routed.routed_weight_bytes = 1e9;
  routed.expert_miss = 0.75;
  EXPECT_TRUE(tokens.covers(routed));
  const PriceTableKey kv_only({BatchFeature::kv_only_tokens}, {BatchFeature::kv_only_alone});
  OpParams kv_routed;
  kv_routed.launch_if = BatchFeature::kv_only_tokens;
  kv_routed.add(BatchFeature::kv_only_tokens, 100, 10);
  EXPECT_TRUE(kv_only.covers(kv_routed));
  kv_routed.routed_weight_bytes = 1e9;
  EXPECT_FALSE(kv_only.covers(kv_routed));

  // Rows: a batch of 5 tokens is row 5 whatever features outside the key hold (a covered op
  // reads none of them); not a whole count, past the rows, negative, NaN or with a zero feature
  // set, it has no row.
  BatchFeatures x{};
  x[at(BatchFeature::tokens)] = 5;
  x[at(BatchFeature::decode_kv)] = 4000;
  std::size_t row = 99;
  ASSERT_TRUE(tokens.row_of(x, 64, row));
  EXPECT_EQ(row, 5U);
  const auto no_row = [&](BatchFeature f, double value) {
    BatchFeatures y = x;
    y[at(f)] = value;
    std::size_t unused = 0;
    return !tokens.row_of(y, 64, unused);
  };
  EXPECT_TRUE(no_row(BatchFeature::tokens, 5.5));
  EXPECT_TRUE(no_row(BatchFeature::tokens, 64));  // rows 0..63
  EXPECT_FALSE(no_row(BatchFeature::tokens, 63));
  EXPECT_TRUE(no_row(BatchFeature::tokens, -1));
  EXPECT_TRUE(no_row(BatchFeature::tokens, std::numeric_limits<double>::quiet_NaN()));
  EXPECT_TRUE(no_row(BatchFeature::kv_reuse_tokens, 1));
  EXPECT_TRUE(no_row(BatchFeature::kv_reuse_all, 1));
  // The row's batch: the count on the keyed feature, 0 elsewhere.
  const BatchFeatures row_x = tokens.row_features(5);
  for (std::size_t f = 0; f < k_batch_feature_count; ++f)
    EXPECT_EQ(row_x[f], f == at(BatchFeature::tokens) ? 5.0 : 0.0) << "feature " << f;

  // The decode head's key: tokens and emitting tokens both the count (every token emits).
  const PriceTableKey head({BatchFeature::tokens, BatchFeature::emitting}, {});
  BatchFeatures h{};
  h[at(BatchFeature::tokens)] = 3;
  h[at(BatchFeature::emitting)] = 3;
  ASSERT_TRUE(head.row_of(h, 64, row));
  EXPECT_EQ(row, 3U);
  h[at(BatchFeature::emitting)] = 2;  // a prefill chunk that emits fewer than its tokens
  EXPECT_FALSE(head.row_of(h, 64, row));
  EXPECT_EQ(head.row_features(7)[at(BatchFeature::emitting)], 7.0);
}

}  // namespace
}  // namespace exitsim::sim
