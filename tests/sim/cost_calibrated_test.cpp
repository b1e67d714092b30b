#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "exitsim/core/error.hpp"
#include "exitsim/sim/cost/calibrated_cost_model.hpp"
#include "exitsim/traces/engine_ops.hpp"
#include "support/test_files.hpp"

namespace exitsim::sim {
namespace {

namespace ops = traces::engine_ops;

// One prelude layer, a one-layer block run three times, one coda layer.
ModelShape tiny() {
  ModelShape m;
  m.name = "tiny";
  m.d_model = 64;
  m.n_heads = 4;
  m.n_kv_heads = 2;
  m.head_dim = 16;
  m.ffn_dim = 128;
  m.vocab = 256;
  m.dtype = DType::fp32;
  m.depth.prelude_layers = 1;
  m.depth.block_layers = 1;
  m.depth.recursions = 3;
  m.depth.coda_layers = 1;
  return m;
}

OpFit linear(std::string_view name, double c0, double per_token, double per_pair = 0) {
  OpFit fit;
  fit.name = std::string(name);
  fit.kind = name == ops::attention ? "attention" : "gemm";
  fit.regimes = {{1 << 20, {c0, per_token, per_pair, 0}}};
  fit.batch_min_seen = 1;
  fit.batch_max_seen = 1 << 20;
  return fit;
}

// Every layer op costs 1 us + 0.1 us per token, attention also 0.01 us per (query, key) pair;
// embed 2 us, LM head 10 + 1 per token, sampling 3 us, the step residual 50 us.
CostProfile profile_of(const ModelShape& m, bool with_kv_only = false) {
  CostProfile p;
  p.source = {"exitsim-engine", "cpu", "test cpu", m.name, model_fingerprint(m), {"t.csv"}};
  for (const std::string_view name : ops::layer)
    p.ops.push_back(linear(name, 1, 0.1, name == ops::attention ? 0.01 : 0));
  p.ops.push_back(linear(ops::embed, 2, 0));
  p.ops.push_back(linear(ops::lm_head, 10, 1));
  p.ops.push_back(linear(ops::sampling, 3, 0));
  p.ops.push_back(linear(ops::step_residual, 50, 0));
  if (with_kv_only)
    p.ops.push_back(linear(ops::kv_only, 4, 0));
  std::sort(p.ops.begin(), p.ops.end(),
            [](const OpFit& a, const OpFit& b) { return a.name < b.name; });
  return p;
}

double layer_us(double tokens, double pairs) {
  return 10 * (1 + 0.1 * tokens) + 0.01 * pairs;
}

TEST(CalibratedCostModel, PricesADecodeStepAsTheEngineRunsIt) {
  const CalibratedCostModel model(profile_of(tiny()), "p.json", tiny());
  // Two decode tokens at contexts 9 and 19: full depth (4 stack layers) and exit at depth 2.
  const std::vector<BatchEntry> batch = {{1, 9, 4, true}, {1, 19, 2, true}};
  const double expected = 2 * layer_us(2, 10 + 20)  // layers 1-2: both tokens
                          + 2 * layer_us(1, 10)     // layers 3-4: the deep one
                          + layer_us(2, 30)         // the coda, both
                          + 2 + (10 + 2) + 3 + 50;  // embed, head, sampling, residual
  EXPECT_EQ(model.iteration_cost(batch).total, static_cast<TimeNs>(std::llround(expected * 1000)));
  EXPECT_EQ(model.name(), "calibrated");
  EXPECT_GT(model.iteration_cost(batch).flops, 0);
}

TEST(CalibratedCostModel, PrefillChunksRunAsTheirOwnPass) {
  const CalibratedCostModel model(profile_of(tiny()), "p.json", tiny());
  // A 4-token chunk at context 8 (pairs 4*8 + 10) emitting its first token, plus one decode.
  const std::vector<BatchEntry> batch = {{4, 8, 4, true}, {1, 0, 4, true}};
  const double prefill = 5 * layer_us(4, 42) + 2 + 11 + 3;
  const double decode = 5 * layer_us(1, 1) + 2 + 11 + 3;
  EXPECT_EQ(model.iteration_cost(batch).total,
            static_cast<TimeNs>(std::llround((prefill + decode + 50) * 1000)));
}

// A profile calibrated at up to 8 running sequences priced a sweep at 16 without a word.
TEST(CalibratedCostModel, CountsPricesOutsideTheCalibratedBatchRange) {
  CostProfile profile = profile_of(tiny(), true);
  for (OpFit& op : profile.ops) {
    if (op.name == ops::qkv_proj)
      op.batch_max_seen = 8;
    if (op.name == ops::lm_head)
      op.regimes.front().mean_of_calls = true;
  }
  const CalibratedCostModel model(profile, "p.json", tiny());
  const std::vector<BatchEntry> small(4, BatchEntry{1, 9, 4, true});
  model.iteration_cost(small);
  EXPECT_EQ(model.notes(),
            std::vector<std::string>{"cost_model.profile: lm_head: regime 0 (batch <= 1048576) "
                                     "priced as its calls' mean, not a fit"});
  // 16 decode tokens: the 5 layer passes (4 stack layers, 1 coda) each call qkv_proj at 16.
  const std::vector<BatchEntry> large(16, BatchEntry{1, 9, 4, true});
  model.iteration_cost(large);
  model.iteration_cost(small);
  const std::vector<std::string> notes = model.notes();
  ASSERT_EQ(notes.size(), 2U);
  EXPECT_EQ(notes[1],
            "cost_model.profile: qkv_proj: 2 of 6 distinct batches priced outside the calibrated "
            "range [1, 8] (largest 16): extrapolated, not measured");
}

// D6: a fit gone wild off its calls (attention at 1e13-1e15 per pair from a short run) priced an
// iteration at years, past the int64 clock: an internal error. The op is named instead.
TEST(CalibratedCostModel, AnOpPricedPastAnyIterationIsNamed) {
  CostProfile profile = profile_of(tiny());
  for (OpFit& op : profile.ops) {
    if (op.name == ops::attention) {
      op.regimes.front().coefficients = {1, 0.1, -2.9e13, 2.9e12};
      op.batch_max_seen = 8;
    }
  }
  const CalibratedCostModel model(profile, "p.json", tiny());
  const std::vector<BatchEntry> batch(16, BatchEntry{1, 9, 4, true});
  const std::string error = [&] {
    try {
      model.iteration_cost(batch);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  }();
  EXPECT_NE(error.find("p.json: cost_model.profile: expected op prices under 1e+09 us, found"),
            std::string::npos)
      << error;
  EXPECT_NE(
      error.find("us for attention at batch 16 and context 160 (its calls had batches 1 to 8)"),
      std::string::npos)
      << error;
}

// A term the calibration's calls did not determine was fitted without; pricing with it says so.
TEST(CalibratedCostModel, NamesTheTermsItsCalibrationLeftOut) {
  CostProfile profile = profile_of(tiny(), true);
  for (OpFit& op : profile.ops) {
    if (op.name == ops::attention)
      op.undetermined_terms = {"batch x context"};
  }
  const CalibratedCostModel model(profile, "p.json", tiny());
  EXPECT_TRUE(model.notes().empty());
  model.iteration_cost(std::vector{BatchEntry{1, 9, 4, true}});
  EXPECT_EQ(model.notes(),
            std::vector<std::string>{"cost_model.profile: attention: its calibration's calls did "
                                     "not determine the batch x context term; priced without it"});
}

TEST(CalibratedCostModel, NamesItsStandInsAndRefusesOtherModels) {
  const CalibratedCostModel without(profile_of(tiny()), "p.json", tiny());
  ASSERT_EQ(without.fallbacks().size(), 1U);
  EXPECT_NE(without.fallbacks()[0].find(ops::kv_only), std::string::npos);
  const CalibratedCostModel with(profile_of(tiny(), true), "p.json", tiny());
  EXPECT_TRUE(with.fallbacks().empty());
  // state_copy: a token exiting at depth 2 writes K/V at layers 3-4.
  BatchEntry copied{1, 9, 2, true};
  copied.kv_only_depth = 4;
  const BatchEntry plain{1, 9, 2, true};
  EXPECT_EQ(with.iteration_cost(std::vector{copied}).total -
                with.iteration_cost(std::vector{plain}).total,
            2 * 4000);

  ModelShape other = tiny();
  other.ffn_dim = 256;
  try {
    const CalibratedCostModel wrong(profile_of(tiny()), "p.json", other);
    FAIL() << "a profile of another model was accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(e.where().file, "p.json");
    EXPECT_NE(e.message().find("ffn256"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("ffn128"), std::string::npos) << e.message();
  }
  // An LM head without sampling is no profile of a whole step (one without either is a base
  // model's, whose head the roofline prices: cost_measured_parallel_test.cpp).
  CostProfile partial = profile_of(tiny());
  std::erase_if(partial.ops, [](const OpFit& f) { return f.name == ops::sampling; });
  try {
    const CalibratedCostModel missing(partial, "p.json", tiny());
    FAIL() << "a profile without sampling was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(e.message().find("\"sampling\""), std::string::npos) << e.message();
  }
}

// A profile keeps what its calibration said (calibrate --kineto's mapping report): written and
// read back line for line; a profile without notes (older ones) reads as none; notes that are
// not a list of lines are refused, naming the key.
TEST(CalibratedCostModel, AProfileKeepsItsNotes) {
  test_support::TempDir dir;
  CostProfile profile = profile_of(tiny());
  profile.notes = {"skipped    2 of 9 steps: 2 with no embedding", "assumed    no prefix"};
  profile.write(dir.path("p.json"));
  EXPECT_EQ(CostProfile::read(dir.path("p.json")).notes, profile.notes);
  profile.notes.clear();
  profile.write(dir.path("none.json"));
  const std::string text = test_support::read_file(dir.path("none.json"));
  EXPECT_EQ(text.find("\"notes\""), std::string::npos);
  EXPECT_TRUE(CostProfile::read(dir.path("none.json")).notes.empty());
  std::string wrong = text;
  wrong.insert(wrong.find('{') + 1, "\"notes\": 3,");
  const std::string bad = dir.write("bad.json", wrong);
  EXPECT_EQ(test_support::error_of([&] { CostProfile::read(bad); }),
            bad + ": notes: expected a list of lines (strings), found 3");
}

// A mixture of experts' fingerprint names its experts and top-k (a profile of Mixtral prices no
// dense model of its attention and expert width); a dense model's is as it always was.
TEST(CalibratedCostModel, AMixturesFingerprintNamesItsExperts) {
  ModelShape m = tiny();
  const std::string dense = model_fingerprint(m);
  EXPECT_EQ(dense.find("moe"), std::string::npos);
  m.experts = 8;
  m.experts_per_token = 2;
  EXPECT_EQ(model_fingerprint(m), dense + " moe 8x2");
}

}  // namespace
}  // namespace exitsim::sim
