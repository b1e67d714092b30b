// The measured cost models (calibrated, table) under tensor and pipeline parallelism: each layer
// adds two all-reduces of its tokens and the head the logits gather; a pipelined step is the
// roofline's micro-batch schedule over the measured stages and hand-offs; whatever the profile or
// table lacks is priced by the roofline, by the formulas of docs/cost_model.md, and said so.
// Every expected price here is worked out by hand from the fits and those formulas.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "exitsim/core/presets.hpp"
#include "exitsim/sim/cost/calibrated_cost_model.hpp"
#include "exitsim/sim/cost/table_cost_model.hpp"
#include "exitsim/traces/engine_ops.hpp"
#include "support/op_fits.hpp"
#include "support/test_files.hpp"

namespace exitsim::sim {
namespace {

namespace ops = traces::engine_ops;
using test_support::error_of;

ModelShape llama() {
  return *find_model_preset("llama-2-7b");  // 32 layers, d_model 4096, vocab 32000
}
HardwareSpec a100() {
  return *find_hardware_preset("a100-80gb");  // NVLink 300 GB/s, 8 GPUs a node
}

OpFit line(std::string_view name, double c0, double per_token) {
  return test_support::linear_fit(name, c0, per_token, "grid");
}

// Every layer op 1 us + 0.1 us a token (a layer: 10 + B), embed 2 + 0.01 B, LM head 20 + 0.5 E,
// sampling 3 + 0.1 E; with `collectives`, tp_all_reduce 5 + 0.02 B, pp_send_recv 7 + 0.03 B and
// pp_send_recv.remote 30 + 0.1 B.
CostProfile profile_at(int tensor_parallel, bool collectives) {
  const ModelShape m = llama();
  CostProfile p;
  p.source = {"vidur", "cuda", "a100-80gb", m.name, model_fingerprint(m), {"mlp.csv"}};
  p.source.tensor_parallel = tensor_parallel;
  for (const std::string_view name : ops::layer)
    p.ops.push_back(line(name, 1, 0.1));
  p.ops.push_back(line(ops::embed, 2, 0.01));
  p.ops.push_back(line(ops::lm_head, 20, 0.5));
  p.ops.push_back(line(ops::sampling, 3, 0.1));
  p.ops.push_back(line(ops::kv_only, 1, 0));
  if (collectives) {
    p.ops.push_back(line(ops::tp_all_reduce, 5, 0.02));
    p.ops.push_back(line(ops::pp_send_recv, 7, 0.03));
    p.ops.push_back(line(ops::pp_send_recv_remote, 30, 0.1));
  }
  std::sort(p.ops.begin(), p.ops.end(),
            [](const OpFit& a, const OpFit& b) { return a.name < b.name; });
  return p;
}

ParallelPricing split(int tensor, int pipeline) {
  return {{tensor, pipeline, 1}, a100(), RooflineEfficiency{}};
}

// `n` decode sequences at context 100 through every layer.
std::vector<BatchEntry> decodes(int n) {
  BatchEntry e;
  e.query_tokens = 1;
  e.context_tokens = 100;
  e.depth = 32;
  e.emits_token = true;
  return std::vector<BatchEntry>(static_cast<std::size_t>(n), e);
}

double layer(double b) {
  return 10 * (1 + 0.1 * b);
}
double all_reduce(double b) {
  return 5 + 0.02 * b;
}
double embed(double b) {
  return 2 + 0.01 * b;
}
double head(double e) {
  return 20 + 0.5 * e + 3 + 0.1 * e;
}
// The roofline's own prices of the ops a profile or table may lack (docs/cost_model.md, "Kernel
// corrections": a collective is the preset's latency plus bytes at its bus-bandwidth share, a
// launch on top), priced alone by a roofline of the same split: the logits gather of `e`
// emitting tokens, one all-reduce of `b` tokens, the hand-off of `b` tokens after stage `stage`.
double roofline_op(int p, int stages, OpKind kind, double tokens) {
  const RooflineCostModel roofline(llama(), a100(), RooflineEfficiency{}, {p, stages, 1});
  BatchFeatures x{};
  x[feature_index(BatchFeature::tokens)] = tokens;
  x[feature_index(BatchFeature::emitting)] = tokens;
  return roofline.op_cost(kind, x).duration_ns / 1000;
}
double roofline_gather(int p, double e) {
  return roofline_op(p, 1, OpKind::logits_gather, e);
}
double roofline_all_reduce(int p, double b) {
  return roofline_op(p, 1, OpKind::tp_all_reduce, b);
}
double roofline_hand_off(int p, int stages, std::size_t stage, double b) {
  const RooflineCostModel roofline(llama(), a100(), RooflineEfficiency{}, {p, stages, 1});
  return roofline.hand_off_ns(stage, b) / 1000;
}

double priced_us(const CostModel& model, const std::vector<BatchEntry>& batch) {
  return static_cast<double>(model.iteration_cost(batch).total) / 1000.0;
}

TEST(MeasuredParallel, EachLayerAddsTwoAllReducesAndTheHeadTheLogitsGather) {
  const CalibratedCostModel model(profile_at(2, true), "p.json", llama(), split(2, 1));
  const std::vector<BatchEntry> batch = decodes(8);
  const double expected =
      32 * (layer(8) + 2 * all_reduce(8)) + embed(8) + head(8) + roofline_gather(2, 8);
  EXPECT_NEAR(priced_us(model, batch), expected, 1e-3);
  // The FLOPs are a TP-2 roofline's: one GPU's shard of each op.
  const RooflineCostModel roofline(llama(), a100(), RooflineEfficiency{}, {2, 1, 1});
  EXPECT_EQ(model.iteration_cost(batch).flops, roofline.iteration_cost(batch).flops);
  const std::vector<std::string> notes = model.notes();
  ASSERT_FALSE(notes.empty());
  EXPECT_NE(notes.back().find("measured by vidur: attention, attn_norm"), std::string::npos)
      << notes.back();
  EXPECT_NE(notes.back().find("tp_all_reduce"), std::string::npos) << notes.back();
  EXPECT_NE(notes.back().find("not in the profile, priced by the roofline: the logits gather (the "
                              "same link)"),
            std::string::npos)
      << notes.back();
}

TEST(MeasuredParallel, APipelinedStepIsTheRooflinesScheduleOverTheMeasuredStages) {
  // TP 2 x PP 2 on one node: stages of 16 layers, the embedding on the first, the head on the
  // second; three sequences make micro-batches of 2 and 1 (each joins the lighter).
  const CalibratedCostModel model(profile_at(2, true), "p.json", llama(), split(2, 2));
  const auto stage0 = [](double b) { return 16 * (layer(b) + 2 * all_reduce(b)) + embed(b); };
  const auto stage1 = [](double b) {
    return 16 * (layer(b) + 2 * all_reduce(b)) + head(b) + roofline_gather(2, b);
  };
  const auto hand_off = [](double b) { return 7 + 0.03 * b; };
  const double busiest = std::max(stage0(2) + stage0(1), stage1(2) + stage1(1));
  const double longest_trip =
      std::max(stage0(2) + hand_off(2) + stage1(2), stage0(1) + hand_off(1) + stage1(1));
  EXPECT_NEAR(priced_us(model, decodes(3)), std::max(busiest, longest_trip), 1e-3);
  // One sequence waits for every stage and the hand-off: the bubble.
  EXPECT_NEAR(priced_us(model, decodes(1)), stage0(1) + hand_off(1) + stage1(1), 1e-3);
  EXPECT_NE(model.notes().back().find("pp_send_recv"), std::string::npos);
}

TEST(MeasuredParallel, AHandOffBetweenNodesIsTheRemoteFit) {
  // TP 4 x PP 4 is 16 GPUs on two nodes of 8: the hand-off after stage 2 of 4 leaves the node.
  const CalibratedCostModel model(profile_at(4, true), "p.json", llama(), split(4, 4));
  const double expected = 32 * (layer(1) + 2 * all_reduce(1)) + embed(1) + head(1) +
                          roofline_gather(4, 1) + 2 * (7 + 0.03) + (30 + 0.1);
  EXPECT_NEAR(priced_us(model, decodes(1)), expected, 1e-3);
}

TEST(MeasuredParallel, WhatTheProfileLacksIsPricedByTheRooflineAndSaidSo) {
  const CalibratedCostModel model(profile_at(2, false), "p.json", llama(), split(2, 2));
  const double b = 1;
  const double stage = 16 * (layer(b) + 2 * roofline_all_reduce(2, b));
  const double expected =
      stage + embed(b) + roofline_hand_off(2, 2, 0, b) + stage + head(b) + roofline_gather(2, b);
  EXPECT_NEAR(priced_us(model, decodes(1)), expected, 1e-3);
  const std::string note = model.notes().back();
  EXPECT_NE(note.find("not in the profile, priced by the roofline: tp_all_reduce "
                      "(hardware.link_latency_us + its bytes at hardware.link_efficiency of "
                      "hardware.link_bandwidth_gbps), the logits gather"),
            std::string::npos)
      << note;
  EXPECT_NE(note.find("pp_send_recv (hand-offs within a node: hardware.send_latency_us, "
                      "send_efficiency)"),
            std::string::npos)
      << note;
}

TEST(MeasuredParallel, RooflineFitsInTheProfileAreNamedAsNotMeasured) {
  CostProfile profile = profile_at(1, false);
  for (OpFit& op : profile.ops) {
    if (op.name == ops::lm_head || op.name == ops::sampling)
      op.measured_by = "roofline";
  }
  const CalibratedCostModel model(profile, "p.json", llama());
  model.iteration_cost(decodes(4));
  const std::string note = model.notes().back();
  EXPECT_NE(note.find("fitted to exitsim's roofline when the profile was made, not measured: "
                      "lm_head, sampling; not in the profile, priced by the roofline: none"),
            std::string::npos)
      << note;
  // A one-GPU profile of exitsim's own engine says nothing of the kind.
  const CalibratedCostModel measured(profile_at(1, false), "p.json", llama());
  measured.iteration_cost(decodes(4));
  for (const std::string& line : measured.notes())
    EXPECT_EQ(line.find("roofline"), std::string::npos) << line;
}

TEST(MeasuredParallel, AProfileOfAnotherTensorParallelDegreeIsRefused) {
  EXPECT_EQ(
      error_of([] { CalibratedCostModel(profile_at(4, true), "p.json", llama(), split(2, 1)); }),
      "p.json: parallel.tensor: expected 4 (the profile's source.tensor_parallel: its fits "
      "price one GPU's shard of each op at that degree), found 2");
  EXPECT_EQ(error_of([] { CalibratedCostModel(profile_at(2, true), "p.json", llama()); }),
            "p.json: parallel.tensor: expected 2 (the profile's source.tensor_parallel: its fits "
            "price one GPU's shard of each op at that degree), found 1");
  // A split the roofline refuses is refused for a measured model too.
  EXPECT_NE(error_of([] {
              CalibratedCostModel(profile_at(3, true), "p.json", llama(), split(3, 1));
            }).find("parallel.tensor"),
            std::string::npos);
}

TEST(MeasuredParallel, AProfileCarriesItsTensorParallelDegree) {
  test_support::TempDir dir;
  CostProfile profile = profile_at(4, true);
  profile.ops.front().measured_by = "roofline";
  profile.write(dir.path("p.json"));
  const CostProfile read = CostProfile::read(dir.path("p.json"));
  EXPECT_EQ(read.source.tensor_parallel, 4);
  EXPECT_EQ(read.ops.front().measured_by, "roofline");
  const std::string text = test_support::read_file(dir.path("p.json"));
  std::string older = text;
  older.erase(older.find("\"tensor_parallel\""), std::string("\"tensor_parallel\": 4,").size());
  const std::string path = dir.write("older.json", older);
  EXPECT_EQ(CostProfile::read(path).source.tensor_parallel, 1) << older.substr(0, 400);
  std::string zero = text;
  zero.replace(zero.find("\"tensor_parallel\": 4"), 20, "\"tensor_parallel\": 0");
  const std::string bad = dir.write("bad.json", zero);
  EXPECT_EQ(error_of([&] { CostProfile::read(bad); }),
            bad + ": source.tensor_parallel: expected a whole number from 1 to 1024, found 0");
}

CostTable table(bool collectives) {
  CostTable t;
  t.layer = {{1, 10}, {101, 110}};  // 9 + B
  t.lm_head = {{1, 20}, {101, 70}};
  t.embedding = {{1, 2}, {101, 3}};
  if (collectives) {
    t.tp_all_reduce = {{1, 5}, {101, 7}};
    t.pp_send_recv = {{1, 7}, {101, 10}};
  }
  t.source = "t.csv";
  return t;
}

TEST(MeasuredParallel, ATablePricesTensorAndPipelineParallelismAlike) {
  const auto t_layer = [](double b) { return 9 + b; };
  const auto t_reduce = [](double b) { return 5 + 0.02 * (b - 1); };
  const auto t_head = [](double e) { return 20 + 0.5 * (e - 1); };
  const auto t_embed = [](double b) { return 2 + 0.01 * (b - 1); };
  const auto t_hand_off = [](double b) { return 7 + 0.03 * (b - 1); };
  {
    const TableCostModel model(table(true), llama(), split(2, 1));
    EXPECT_NEAR(
        priced_us(model, decodes(8)),
        32 * (t_layer(8) + 2 * t_reduce(8)) + t_head(8) + roofline_gather(2, 8) + t_embed(8), 1e-3);
    const std::string note = model.notes().back();
    EXPECT_NE(note.find("cost_model.table: measured (the table's rows): layer, lm_head, "
                        "embedding, tp_all_reduce; not in the table, priced by the roofline: the "
                        "logits gather"),
              std::string::npos)
        << note;
  }
  {
    const TableCostModel model(table(true), llama(), split(2, 2));
    const auto stage0 = [&](double b) { return 16 * (t_layer(b) + 2 * t_reduce(b)) + t_embed(b); };
    const auto stage1 = [&](double b) {
      return 16 * (t_layer(b) + 2 * t_reduce(b)) + t_head(b) + roofline_gather(2, b);
    };
    const double busiest = std::max(stage0(2) + stage0(1), stage1(2) + stage1(1));
    const double trip =
        std::max(stage0(2) + t_hand_off(2) + stage1(2), stage0(1) + t_hand_off(1) + stage1(1));
    EXPECT_NEAR(priced_us(model, decodes(3)), std::max(busiest, trip), 1e-3);
  }
  {
    const TableCostModel model(table(false), llama(), split(2, 2));
    const double stage = 16 * (t_layer(1) + 2 * roofline_all_reduce(2, 1));
    EXPECT_NEAR(priced_us(model, decodes(1)),
                stage + t_embed(1) + roofline_hand_off(2, 2, 0, 1) + stage + t_head(1) +
                    roofline_gather(2, 1),
                1e-3);
    EXPECT_NE(model.notes().back().find("not in the table, priced by the roofline: "
                                        "tp_all_reduce"),
              std::string::npos)
        << model.notes().back();
  }
}

// A profile of a base model (calibrate --kineto of a Hugging Face AutoModel) has no LM head and no
// sampling: the roofline prices the final norm, the head and sampling of the emitting tokens,
// on one GPU as under TP (with the logits gather there), and the notes say so.
TEST(MeasuredParallel, AProfileWithoutAnLmHeadPricesItByTheRoofline) {
  for (const int tp : {1, 2}) {
    SCOPED_TRACE(tp);
    CostProfile headless = profile_at(tp, tp > 1);
    std::erase_if(headless.ops, [](const OpFit& op) {
      return op.name == ops::lm_head || op.name == ops::sampling;
    });
    const CalibratedCostModel model(headless, "p.json", llama(), split(tp, 1));
    const double roofline_head = roofline_op(tp, 1, OpKind::final_norm, 8) +
                                 roofline_op(tp, 1, OpKind::lm_head, 8) +
                                 roofline_op(tp, 1, OpKind::sampling, 8);
    const double layers = 32 * (layer(8) + (tp > 1 ? 2 * all_reduce(8) : 0));
    const double gather = tp > 1 ? roofline_gather(tp, 8) : 0;
    EXPECT_NEAR(priced_us(model, decodes(8)), layers + embed(8) + roofline_head + gather, 1e-3);
    // Sequences that emit nothing run no head: nothing of the roofline's is added.
    std::vector<BatchEntry> silent = decodes(8);
    for (BatchEntry& e : silent)
      e.emits_token = false;
    EXPECT_NEAR(priced_us(model, silent), layers + embed(8), 1e-3);
    const std::vector<std::string> notes = model.notes();
    ASSERT_FALSE(notes.empty());
    EXPECT_NE(notes.back().find("not in the profile, priced by the roofline: "), std::string::npos)
        << notes.back();
    EXPECT_NE(notes.back().find("the final norm, lm_head and sampling (the profile's traces ran a "
                                "model without an LM head)"),
              std::string::npos)
        << notes.back();
  }
}

}  // namespace
}  // namespace exitsim::sim
