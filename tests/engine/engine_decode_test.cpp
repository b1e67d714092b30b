// The decoding loop against the reference forward pass, and the invariants that make its
// measurements trustworthy: batching never changes what is decoded, every strategy equals full
// depth when nobody exits, and deferred_fill's filled K/V is exact.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "exitsim/engine/cpu_model.hpp"
#include "exitsim/engine/engine.hpp"
#include "support/support_model.hpp"

namespace exitsim::engine {
namespace {

using test_support::reference_forward;
using test_support::small_config;
using test_support::small_recursive_depth;
using test_support::small_weights;

std::vector<EngineRequest> requests(int count, std::int64_t output_tokens = 8) {
  std::vector<EngineRequest> out;
  for (int i = 0; i < count; ++i) {
    EngineRequest r;
    r.id = RequestId(static_cast<std::uint64_t>(100 + i));
    for (int t = 0; t < 4 + 3 * i; ++t)
      r.prompt.push_back(static_cast<std::int32_t>((7 * t + 11 * i + 3) % 50));
    r.output_tokens = output_tokens;
    out.push_back(r);
  }
  return out;
}

EngineOptions options_for(const std::string& strategy, const std::string& exit_kind = "none") {
  EngineOptions o;
  o.strategy = *policy::parse_sync_strategy(strategy);
  o.exit_policy.kind = exit_kind;
  if (exit_kind == "distribution")
    o.exit_policy.probabilities = {0.45, 0.3, 0.25};
  if (exit_kind == "confidence")
    o.exit_policy.threshold = 0.6;
  o.kv_blocks = 64;
  o.block_size = 4;
  return o;
}

class EngineDecode : public testing::Test {
 protected:
  EngineDecode()
      : config_(small_config(small_recursive_depth())),
        weights_(small_weights(config_)),
        model_(config_, weights_) {}

  EngineRun run(EngineOptions options, const std::vector<EngineRequest>& reqs) {
    Engine engine(model_, std::move(options));
    return engine.run(reqs);
  }

  ModelConfig config_;
  ModelWeights weights_;
  CpuModel model_;
};

TEST_F(EngineDecode, FullDepthMatchesTheReferenceForwardPass) {
  const std::vector<EngineRequest> reqs = requests(3);
  std::map<std::pair<std::uint64_t, std::int64_t>, std::vector<float>> logits;
  EngineOptions options = options_for("full_depth");
  options.observer.on_logits = [&](RequestId id, std::int64_t position, int,
                                   std::span<const float> values) {
    logits[{id.value, position}].assign(values.begin(), values.end());
  };
  const EngineRun result = run(options, reqs);
  double worst = 0;
  double largest = 0;
  for (std::size_t i = 0; i < reqs.size(); ++i) {
    std::vector<std::int32_t> tokens = reqs[i].prompt;
    tokens.insert(tokens.end(), result.outputs[i].begin(), result.outputs[i].end());
    ASSERT_EQ(result.outputs[i].size(), 8u);
    const auto ref = reference_forward(config_, weights_, tokens);
    for (std::int64_t p = 0; p < 8; ++p) {
      const auto row = static_cast<Eigen::Index>(reqs[i].prompt.size()) - 1 + p;
      const std::vector<float>& got = logits.at({reqs[i].id.value, p});
      Eigen::Index best = 0;
      ref.logits.row(row).maxCoeff(&best);
      EXPECT_EQ(result.outputs[i][static_cast<std::size_t>(p)], best) << "request " << i;
      for (Eigen::Index v = 0; v < ref.logits.cols(); ++v) {
        worst = std::max(
            worst, std::abs(double{got[static_cast<std::size_t>(v)]} - double{ref.logits(row, v)}));
        largest = std::max(largest, std::abs(double{ref.logits(row, v)}));
      }
    }
  }
  // fp32 through eight layers against a float64 reference, on the scale of the logits (up to
  // ~14 here): measured 1.2e-5 absolute, 8.5e-7 of the largest logit; a few ulps of fp32.
  EXPECT_LT(worst, 1e-5 * std::max(1.0, largest / 10));
}

// batch_sync is left out on purpose: an exited token's deeper K/V comes from riding along with
// deeper tokens of its batch, so what it holds (and later tokens see) depends on the batch.
TEST_F(EngineDecode, BatchingNeverChangesWhatIsDecoded) {
  const std::vector<EngineRequest> reqs = requests(4, 10);
  for (const char* strategy :
       {"full_depth", "state_copy", "deferred_fill", "skip_kv", "shared_kv", "depthwise"}) {
    for (const char* exits : {"distribution", "confidence"}) {
      SCOPED_TRACE(std::string(strategy) + " / " + exits);
      const EngineRun together = run(options_for(strategy, exits), reqs);
      for (std::size_t i = 0; i < reqs.size(); ++i) {
        const EngineRun alone = run(options_for(strategy, exits), {reqs[i]});
        EXPECT_EQ(alone.outputs[0], together.outputs[i]) << "request " << i;
      }
    }
  }
}

// Greedy decoding reads the head's top-2 summary; an on_logits observer makes the loop bring the
// logits back too. Which one the head returned must not change a token, an exit or a score.
TEST_F(EngineDecode, ObservingTheLogitsChangesNothingDecoded) {
  const std::vector<EngineRequest> reqs = requests(3, 10);
  for (const char* strategy : {"state_copy", "deferred_fill", "batch_sync", "depthwise"}) {
    for (const char* exits : {"confidence", "oracle", "distribution"}) {
      if (std::string(strategy) == "depthwise" && std::string(exits) == "oracle")
        continue;
      SCOPED_TRACE(std::string(strategy) + " / " + exits);
      EngineOptions plain = options_for(strategy, exits);
      plain.rollback = std::string(strategy) == "deferred_fill";
      EngineOptions observed = plain;
      std::int64_t observed_tokens = 0;
      observed.observer.on_logits = [&](RequestId, std::int64_t, int, std::span<const float> l) {
        EXPECT_EQ(static_cast<std::int64_t>(l.size()), config_.shape.vocab);
        ++observed_tokens;
      };
      const EngineRun a = run(plain, reqs);
      const EngineRun b = run(observed, reqs);
      EXPECT_EQ(a.outputs, b.outputs);
      ASSERT_EQ(a.tokens.size(), b.tokens.size());
      EXPECT_EQ(observed_tokens, static_cast<std::int64_t>(b.tokens.size()));
      for (std::size_t t = 0; t < a.tokens.size(); ++t) {
        EXPECT_EQ(a.tokens[t].exit_point, b.tokens[t].exit_point) << t;
        if (!std::isnan(a.tokens[t].score)) {
          EXPECT_EQ(a.tokens[t].score, b.tokens[t].score) << t;
        }
      }
    }
  }
}

TEST_F(EngineDecode, ExitsHappenAtEveryPointUnderBothPolicies) {
  for (const char* exits : {"distribution", "confidence"}) {
    const EngineRun r = run(options_for("state_copy", exits), requests(4, 12));
    std::map<int, int> points;
    for (const GeneratedToken& t : r.tokens)
      ++points[t.exit_point];
    EXPECT_EQ(points.size(), 3u) << exits;
  }
}

TEST_F(EngineDecode, WithoutExitsEveryStrategyDecodesWhatFullDepthDecodes) {
  const std::vector<EngineRequest> reqs = requests(3);
  const EngineRun full = run(options_for("full_depth"), reqs);
  for (const char* strategy :
       {"batch_sync", "state_copy", "deferred_fill", "skip_kv", "depthwise"}) {
    EXPECT_EQ(run(options_for(strategy), reqs).outputs, full.outputs) << strategy;
  }
}

// full_depth is the baseline: an exit policy in the options changes nothing, as in the simulator.
TEST_F(EngineDecode, FullDepthIgnoresTheExitPolicy) {
  const std::vector<EngineRequest> reqs = requests(3);
  const EngineRun plain = run(options_for("full_depth"), reqs);
  for (const char* exits : {"distribution", "confidence"}) {
    const EngineRun r = run(options_for("full_depth", exits), reqs);
    EXPECT_EQ(r.outputs, plain.outputs) << exits;
    for (const GeneratedToken& t : r.tokens)
      EXPECT_EQ(t.exit_point, 2) << exits;  // the last of the three exit points
  }
}

// A finished sequence's K/V at one layer, as the on_finished_kv observer reports it.
struct Rows {
  std::vector<std::int32_t> positions;
  std::vector<float> keys, values;
};

// An on_finished_kv observer keeping every request's rows per layer in `cache`.
auto keep_kv(std::map<std::pair<std::uint64_t, int>, Rows>& cache) {
  return [&cache](RequestId id, int layer, std::span<const std::int32_t> positions,
                  std::span<const float> keys, std::span<const float> values) {
    cache[{id.value, layer}] = {{positions.begin(), positions.end()},
                                {keys.begin(), keys.end()},
                                {values.begin(), values.end()}};
  };
}

TEST_F(EngineDecode, DeferredFillWritesExactKvForTheFilledPositions) {
  const std::vector<EngineRequest> reqs = requests(2, 16);
  std::map<std::pair<std::uint64_t, int>, Rows> cache;
  EngineOptions options = options_for("deferred_fill", "distribution");
  options.observer.on_finished_kv = keep_kv(cache);
  const EngineRun result = run(options, reqs);
  const int stacked = config_.shape.depth.stacked_depth();
  const auto width = static_cast<std::size_t>(model_.kv_width());
  std::int64_t filled = 0;
  for (std::size_t i = 0; i < reqs.size(); ++i) {
    std::vector<std::int32_t> tokens = reqs[i].prompt;
    tokens.insert(tokens.end(), result.outputs[i].begin(), result.outputs[i].end());
    const auto ref = reference_forward(config_, weights_, tokens);
    const auto prompt = static_cast<std::int32_t>(reqs[i].prompt.size());
    // The coda ran on each token's exit state, not its full-depth one: only the stack compares.
    for (int layer = 0; layer < stacked; ++layer) {
      const Rows& rows = cache.at({reqs[i].id.value, layer});
      for (std::size_t k = 0; k < rows.positions.size(); ++k) {
        const auto p = static_cast<Eigen::Index>(rows.positions[k]);
        for (std::size_t c = 0; c < width; ++c) {
          ASSERT_NEAR(rows.keys[k * width + c],
                      ref.keys[static_cast<std::size_t>(layer)](p, static_cast<Eigen::Index>(c)),
                      1e-5)
              << "layer " << layer << " position " << p;
          ASSERT_NEAR(rows.values[k * width + c],
                      ref.values[static_cast<std::size_t>(layer)](p, static_cast<Eigen::Index>(c)),
                      1e-5);
        }
      }
    }
    // Positions that exited early and were filled later by a deep token: present at the top.
    const Rows& top = cache.at({reqs[i].id.value, stacked - 1});
    for (const GeneratedToken& t : result.tokens) {
      const std::int32_t position = prompt - 1 + static_cast<std::int32_t>(t.position);
      const bool at_top =
          std::find(top.positions.begin(), top.positions.end(), position) != top.positions.end();
      if (t.request == reqs[i].id && t.exit_point < 2 && t.position > 0 && at_top)
        ++filled;
    }
  }
  EXPECT_GT(filled, 3);
}

// state_copy: a token that exits at depth e still has K/V at every stack layer from e up, computed
// from its exit state. The oracle is the reference forward pass with each position's state held
// from its exit depth on (the engine's own exits): every K/V row the engine holds, at every
// executed layer, matches it, and each early exit's skipped layers are all present.
TEST_F(EngineDecode, StateCopyWritesKvFromTheExitStateAtEveryLayerATokenSkipped) {
  const std::vector<EngineRequest> reqs = requests(2, 16);
  std::map<std::pair<std::uint64_t, int>, Rows> cache;
  EngineOptions options = options_for("state_copy", "distribution");
  options.observer.on_finished_kv = keep_kv(cache);
  const EngineRun result = run(options, reqs);
  ASSERT_EQ(result.preemptions, 0);  // a recompute would rerun positions at full depth
  const int stacked = config_.shape.depth.stacked_depth();
  const auto width = static_cast<std::size_t>(model_.kv_width());
  std::int64_t skipped_layers = 0;  // (position, layer) pairs a token skipped, checked
  double unlike_full_depth = 0;     // how far those rows are from the full-depth pass's
  for (std::size_t i = 0; i < reqs.size(); ++i) {
    std::vector<std::int32_t> tokens = reqs[i].prompt;
    tokens.insert(tokens.end(), result.outputs[i].begin(), result.outputs[i].end());
    // Position prompt - 1 + p decoded output p + 1 at that token's exit depth; the prompt ran
    // the whole stack in its prefill.
    std::vector<int> exit_depths(tokens.size(), stacked);
    const auto prompt = static_cast<std::int32_t>(reqs[i].prompt.size());
    for (const GeneratedToken& t : result.tokens) {
      if (t.request == reqs[i].id && t.position > 0)
        exit_depths[static_cast<std::size_t>(prompt - 1 + t.position)] = t.exit_depth;
    }
    const auto ref = reference_forward(config_, weights_, tokens, exit_depths);
    const auto full = reference_forward(config_, weights_, tokens);
    for (int layer = 0; layer < model_.executed_layers(); ++layer) {
      const Rows& rows = cache.at({reqs[i].id.value, layer});
      for (std::size_t k = 0; k < rows.positions.size(); ++k) {
        const auto p = static_cast<Eigen::Index>(rows.positions[k]);
        for (std::size_t c = 0; c < width; ++c) {
          const auto column = static_cast<Eigen::Index>(c);
          const auto l = static_cast<std::size_t>(layer);
          ASSERT_NEAR(rows.keys[k * width + c], ref.keys[l](p, column), 1e-5)
              << "layer " << layer << " position " << p;
          ASSERT_NEAR(rows.values[k * width + c], ref.values[l](p, column), 1e-5)
              << "layer " << layer << " position " << p;
          if (layer >= exit_depths[static_cast<std::size_t>(p)] && layer < stacked) {
            unlike_full_depth =
                std::max(unlike_full_depth,
                         std::abs(double{rows.keys[k * width + c]} - full.keys[l](p, column)));
          }
        }
      }
    }
    // Every layer each early exit skipped holds its row.
    for (std::size_t p = 0; p + 1 < tokens.size(); ++p) {
      for (int layer = exit_depths[p]; layer < stacked; ++layer) {
        const std::vector<std::int32_t>& held = cache.at({reqs[i].id.value, layer}).positions;
        EXPECT_NE(std::find(held.begin(), held.end(), static_cast<std::int32_t>(p)), held.end())
            << "layer " << layer << " position " << p;
        ++skipped_layers;
      }
    }
  }
  EXPECT_GT(skipped_layers, 20);  // 78 here
  // Not the full-depth K/V: the rows of skipped layers come from the exit state (3.4 apart here,
  // against the 1e-5 the comparison allows).
  EXPECT_GT(unlike_full_depth, 1e-2);
}

TEST_F(EngineDecode, RollbackReplacesDisagreeingFillsAndLeavesExactKv) {
  const std::vector<EngineRequest> reqs = requests(2, 20);
  std::map<std::pair<std::uint64_t, int>, std::vector<std::int32_t>> positions_at;
  std::map<std::pair<std::uint64_t, int>, std::vector<float>> keys_at;
  EngineOptions options = options_for("deferred_fill", "distribution");
  options.rollback = true;
  options.observer.on_finished_kv = [&](RequestId id, int layer,
                                        std::span<const std::int32_t> positions,
                                        std::span<const float> keys, std::span<const float>) {
    positions_at[{id.value, layer}].assign(positions.begin(), positions.end());
    keys_at[{id.value, layer}].assign(keys.begin(), keys.end());
  };
  const EngineRun result = run(options, reqs);
  EXPECT_GT(result.filled_states, 0);
  EXPECT_GT(result.disagreements, 0);
  EXPECT_GT(result.rolled_back_tokens, 0);
  std::int64_t kept = 0;
  for (const GeneratedToken& t : result.tokens)
    kept += t.discarded ? 0 : 1;
  EXPECT_EQ(kept, 40);
  EXPECT_EQ(static_cast<std::int64_t>(result.tokens.size()) - kept, result.rolled_back_tokens);
  // The K/V left behind belongs to the final tokens only: no row of a discarded token survives.
  const auto width = static_cast<std::size_t>(model_.kv_width());
  for (std::size_t i = 0; i < reqs.size(); ++i) {
    ASSERT_EQ(result.outputs[i].size(), 20u);
    std::vector<std::int32_t> tokens = reqs[i].prompt;
    tokens.insert(tokens.end(), result.outputs[i].begin(), result.outputs[i].end());
    const auto ref = reference_forward(config_, weights_, tokens);
    for (int layer = 0; layer < config_.shape.depth.stacked_depth(); ++layer) {
      const auto& positions = positions_at.at({reqs[i].id.value, layer});
      const auto& keys = keys_at.at({reqs[i].id.value, layer});
      for (std::size_t k = 0; k < positions.size(); ++k) {
        for (std::size_t c = 0; c < width; ++c) {
          ASSERT_NEAR(
              keys[k * width + c],
              ref.keys[static_cast<std::size_t>(layer)](positions[k], static_cast<Eigen::Index>(c)),
              1e-5)
              << "layer " << layer << " position " << positions[k];
        }
      }
    }
  }
}

TEST_F(EngineDecode, SkipKvKeepsNoKvAtRecursionsATokenDidNotReach) {
  const std::vector<EngineRequest> reqs = requests(1, 24);
  std::map<int, std::size_t> rows_at;
  EngineOptions options = options_for("skip_kv", "distribution");
  options.observer.on_finished_kv = [&](RequestId, int layer, std::span<const std::int32_t> p,
                                        std::span<const float>,
                                        std::span<const float>) { rows_at[layer] = p.size(); };
  const EngineRun result = run(options, reqs);
  // Prelude: every token but the last; recursion 3 only the prompt and the tokens that went deep.
  const std::size_t all = reqs[0].prompt.size() + 23;
  EXPECT_EQ(rows_at.at(0), all);
  EXPECT_LT(rows_at.at(5), rows_at.at(3));
  EXPECT_LT(rows_at.at(3), all);
  EXPECT_EQ(rows_at.at(7), all);  // the coda: every token runs it
  EXPECT_EQ(result.outputs[0].size(), 24u);
}

TEST_F(EngineDecode, PreemptionAndRecomputeKeepFullDepthOutputs) {
  const std::vector<EngineRequest> reqs = requests(4, 20);
  EngineOptions tight = options_for("full_depth");
  tight.kv_blocks = 14;  // 4-token blocks: not enough for all four sequences to grow at once
  const EngineRun squeezed = run(tight, reqs);
  const EngineRun ample = run(options_for("full_depth"), reqs);
  EXPECT_GT(squeezed.preemptions, 0);
  EXPECT_EQ(squeezed.outputs, ample.outputs);
}

// Swap preemption keeps a victim's K/V exactly: under skip_kv a sequence's K/V depends on the
// exits it took (no rows at recursions a token skipped), which a recompute rebuilds at full depth
// and a swap keeps. So the swapped run decodes what the unpreempted one does, without a prefill
// after the first.
TEST_F(EngineDecode, SwapPreemptionResumesWithTheVictimsOwnKv) {
  const std::vector<EngineRequest> reqs = requests(4, 20);
  EngineOptions tight = options_for("skip_kv", "distribution");
  tight.kv_blocks = 14;
  tight.scheduler_params.preemption = "swap";
  tight.host_kv_blocks = 1000;
  const EngineRun swapped = run(tight, reqs);
  const EngineRun ample = run(options_for("skip_kv", "distribution"), reqs);
  tight.scheduler_params.preemption = "recompute";
  const EngineRun recomputed = run(tight, reqs);
  ASSERT_GT(swapped.preemptions, 0);
  EXPECT_EQ(swapped.swaps.swapped_out, swapped.preemptions);
  EXPECT_EQ(swapped.swaps.recomputed_instead, 0);
  EXPECT_GT(swapped.swaps.swapped_out_blocks, 0);
  EXPECT_EQ(swapped.swaps.swapped_in_blocks, swapped.swaps.swapped_out_blocks);
  EXPECT_EQ(swapped.outputs, ample.outputs);
  EXPECT_NE(recomputed.outputs, ample.outputs);
  std::int64_t prefill_tokens = 0, prompt_tokens = 0;
  for (const StepRecord& step : swapped.steps) {
    for (const policy::StepRow& row : step.rows)
      prefill_tokens += row.kind == policy::RowKind::prefill ? row.query_tokens : 0;
  }
  for (const EngineRequest& r : reqs)
    prompt_tokens += static_cast<std::int64_t>(r.prompt.size());
  EXPECT_EQ(prefill_tokens, prompt_tokens);
}

// A host tier too small for any victim: every preemption falls back to recompute.
TEST_F(EngineDecode, SwapFallsBackToRecomputeWhenTheHostTierIsFull) {
  const std::vector<EngineRequest> reqs = requests(4, 20);
  EngineOptions tight = options_for("full_depth");
  tight.kv_blocks = 14;
  tight.scheduler_params.preemption = "swap";
  tight.host_kv_blocks = 1;
  const EngineRun run_out = run(tight, reqs);
  ASSERT_GT(run_out.preemptions, 0);
  EXPECT_EQ(run_out.swaps.swapped_out, 0);
  EXPECT_EQ(run_out.swaps.recomputed_instead, run_out.preemptions);
  EXPECT_EQ(run_out.outputs, run(options_for("full_depth"), reqs).outputs);
}

TEST_F(EngineDecode, DepthwiseAccumulationDelaysHeadsButNotTokens) {
  const std::vector<EngineRequest> reqs = requests(4, 10);
  EngineOptions held = options_for("depthwise", "distribution");
  held.depthwise = {policy::ExitedTokens::accumulate, 3};
  const EngineRun immediate = run(options_for("depthwise", "distribution"), reqs);
  const EngineRun accumulated = run(held, reqs);
  EXPECT_EQ(accumulated.outputs, immediate.outputs);
  EXPECT_GT(accumulated.iterations, immediate.iterations);
}

}  // namespace
}  // namespace exitsim::engine

namespace exitsim::engine {
namespace {

TEST(EngineProfile, EveryOpOfTheLoopIsASpanWithItsShape) {
  const ModelConfig config = test_support::small_config(test_support::small_recursive_depth());
  const ModelWeights weights = test_support::small_weights(config);
  const CpuModel model(config, weights);
  EngineOptions options;
  options.strategy = policy::SyncStrategy::state_copy;
  options.exit_policy.kind = "router_expert_choice";
  options.exit_policy.threshold = 0.5;
  options.block_size = 4;
  options.kv_blocks = 64;
  profiler::HostProfiler profiler;
  Engine engine(model, options, &profiler);
  std::vector<EngineRequest> reqs(2);
  for (std::size_t i = 0; i < reqs.size(); ++i) {
    reqs[i].id = RequestId(i);
    reqs[i].prompt = {1, 2, 3, static_cast<std::int32_t>(4 + i)};
    reqs[i].output_tokens = 6;
  }
  const EngineRun run = engine.run(reqs);
  std::map<std::string, int> names;
  std::uint64_t last_step = 0;
  std::map<std::uint64_t, std::int64_t> max_context;  // per step
  for (const traces::OpTraceRow& row : profiler.rows()) {
    ++names[row.name];
    EXPECT_GE(row.duration_ns, 0);
    EXPECT_GT(row.step_id, 0u);
    last_step = std::max(last_step, row.step_id);
    if (row.name == "attention") {
      // Context: the (query, key) pairs attention reads, as the simulator counts them.
      EXPECT_GE(row.depth, 0);
      max_context[row.step_id] = std::max(max_context[row.step_id], row.context_tokens);
      if (row.step_id == 1) {
        EXPECT_EQ(row.context_tokens, 2 * (1 + 2 + 3 + 4));  // two 4-token prompts, causal
      }
      EXPECT_EQ(row.recursion, model.source_of(row.depth).recursion);
    }
  }
  for (const char* op :
       {"embed", "attn_norm", "qkv_proj", "rotary", "kv_write", "attention", "o_proj", "mlp_norm",
        "mlp.gate_up", "mlp.act", "mlp.down", "lm_head", "router", "sampling", "compaction"}) {
    EXPECT_GT(names[op], 0) << op;
  }
  EXPECT_EQ(static_cast<std::int64_t>(last_step), run.iterations);
  ASSERT_EQ(static_cast<std::int64_t>(run.steps.size()), run.iterations);
  EXPECT_EQ(run.steps.front().prefill.size(), 2u);  // both prompts in the first step
  EXPECT_EQ(run.steps.back().decode.size(), 2u);
  // The last decode step: two sequences, 8 earlier tokens each, and itself.
  EXPECT_EQ(max_context[last_step], 2 * 9);
}

}  // namespace
}  // namespace exitsim::engine
