// The rules by which `calibrate --kineto` reads what frameworks write, one rule at a time on
// traces varied from the GPU fixture (make_gpu_fixture.py: 12 decode steps of a one-layer model,
// each step's operators 0 embedding, 1-2 norm, 3-5 q/k/v, 6-9 rotary and cache, 10 SDPA,
// 11 transpose, 12 o_proj, 13-14 norm, 15 gate, 16 silu, 17 up, 18 mul, 19 down, 20-21 norm,
// 22 LM head, 23 argmax) or built here as vLLM records its custom operators.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "exitsim/analysis/calibrate.hpp"
#include "exitsim/sim/cost/calibrated_cost_model.hpp"
#include "support/kineto_traces.hpp"
#include "support/test_files.hpp"

namespace exitsim::analysis {
namespace {

using nlohmann::json;
using test_support::error_of;
using test_support::gpu_fixture;
using test_support::import_json;
using test_support::rewrite;
using test_support::steps_mapped;
using test_support::TempDir;

const std::string k_gpu_shape = "d64 h4/2x16 ffn128 v100 gated depth 1+0x0+0 lora -";
const json k_none = json::array();

bool has_line(const KinetoCalibration& imported, const std::string& line) {
  return std::find(imported.report.begin(), imported.report.end(), line) != imported.report.end();
}

// Older PyTorch writes "Input dims" and files operators under the category "Operator".
TEST(KinetoRules, OlderSpellingsAreRead) {
  TempDir dir;
  const json trace = rewrite(gpu_fixture(), [](json& e) {
    if (e["cat"] == "cpu_op") {
      e["cat"] = "Operator";
      e["args"]["Input dims"] = e["args"]["Input Dims"];
      e["args"].erase("Input Dims");
    }
    return k_none;
  });
  const KinetoCalibration imported = import_json(dir, "old.json", trace);
  EXPECT_EQ(imported.profile.source.model_shape, k_gpu_shape);
  EXPECT_EQ(steps_mapped(imported), 12);
}

// torch.compile runs a model inside a "Torch-Compiled Region" operator without shapes; the ops it
// ran carry them. Each step wrapped in one such region maps as before, and each op still owns its
// kernels (qkv_proj: three projections' kernels, 3 x (3 + 0.1 B) us).
TEST(KinetoRules, TorchCompiledRegionsAreReadThrough) {
  TempDir dir;
  int step = 0;
  const json trace = rewrite(gpu_fixture(), [&](json& e) {
    json extra = json::array();
    if (e["cat"] == "user_annotation") {  // ProfilerStep#n: a region just inside it
      extra.push_back({{"ph", "X"},
                       {"cat", "cpu_op"},
                       {"name", "Torch-Compiled Region: 0/" + std::to_string(step++)},
                       {"pid", e["pid"]},
                       {"tid", e["tid"]},
                       {"ts", e["ts"].get<double>() + 0.5},
                       {"dur", e["dur"].get<double>() - 1},
                       {"args", {{"External id", 100000 + step}}}});
    }
    return extra;
  });
  const KinetoCalibration imported = import_json(dir, "compiled.json", trace);
  EXPECT_EQ(imported.profile.source.model_shape, k_gpu_shape);
  EXPECT_EQ(steps_mapped(imported), 12);
  const sim::OpFit* qkv = imported.profile.find("qkv_proj");
  ASSERT_NE(qkv, nullptr);
  EXPECT_NEAR(qkv->predict_us(8, 88), 3 * (3.0 + 0.1 * 8), 1e-6);
}

// Renames the embedding of the first `no_embedding` steps and the SDPA of the others.
json with_unknown_parts(int no_embedding, const std::string& attention) {
  int step = -1;
  return rewrite(gpu_fixture(), [&](json& e) {
    if (e["name"] == "aten::embedding" && ++step < no_embedding)
      e["name"] = "aten::index_select";
    else if (e["name"] == "aten::scaled_dot_product_attention" && step >= no_embedding)
      e["name"] = attention;
    return k_none;
  });
}

// Every step that cannot be mapped is counted under its reason, the first one's operator named
// by its position in its step (op 10: the attention, in step 3: the first with an embedding).
TEST(KinetoRules, AnUnmappableTraceIsRefusedWithEachReasonCounted) {
  TempDir dir;
  const json trace = with_unknown_parts(3, "vllm::foo");
  const std::string path = dir.write("unknown.json", trace.dump());
  EXPECT_EQ(error_of([&] { calibrate_kineto(std::vector<std::string>{path}, {}); }),
            path +
                ": traceEvents: expected steps with an embedding and transformer layers, found "
                "none of 12 steps: 3 with no embedding (aten::embedding of a 2-D weight) (first: "
                "step 0 (ProfilerStep#0)), 9 with an unknown attention (no attention operator "
                "after the q/k/v projections) (first: vllm::foo at op 10 of step 3)");
}

// A step whose embedding is followed straight by the LM head has no layer (a fuzzer's finding: it
// was read as a step of no layers).
TEST(KinetoRules, AHeadWithoutLayersIsNoLayer) {
  TempDir dir;
  const auto op = [](const std::string& name, double ts, json dims) {
    return json{{"ph", "X"}, {"cat", "cpu_op"}, {"name", name}, {"pid", 1},
                {"tid", 1},  {"ts", ts},        {"dur", 5},     {"args", {{"Input Dims", dims}}}};
  };
  json trace = {{"traceEvents",
                 {op("aten::embedding", 1, {{100, 64}, {2, 1}}),
                  op("aten::linear", 7, {{2, 1, 64}, {100, 64}, {}}),
                  {{"ph", "X"},
                   {"cat", "user_annotation"},
                   {"name", "ProfilerStep#0"},
                   {"pid", 1},
                   {"tid", 1},
                   {"ts", 0},
                   {"dur", 20}}}}};
  const std::string path = dir.write("head_only.json", trace.dump());
  EXPECT_EQ(error_of([&] { calibrate_kineto(std::vector<std::string>{path}, {}); }),
            path +
                ": traceEvents: expected steps with an embedding and transformer layers, found "
                "none of 1 steps: 1 with no recognisable layer (no q/k/v projection of d_model "
                "inputs after the embedding) (first: step 0 (ProfilerStep#0))");
}

// Where some steps map, the skipped ones are listed with their reasons on the console and in the
// profile's notes.
TEST(KinetoRules, SkippedStepsAreReportedBesideTheProfile) {
  TempDir dir;
  const KinetoCalibration imported =
      import_json(dir, "some.json", with_unknown_parts(3, "aten::scaled_dot_product_attention"));
  EXPECT_EQ(steps_mapped(imported), 9);
  const std::string line =
      "skipped    3 of 12 steps: 3 with no embedding (aten::embedding of a 2-D weight) (first: "
      "step 0 (ProfilerStep#0))";
  EXPECT_TRUE(has_line(imported, line));
  EXPECT_NE(std::find(imported.profile.notes.begin(), imported.profile.notes.end(), line),
            imported.profile.notes.end());
}

// A GPU that runs behind the CPU: every kernel 1 ms later than the fixture's. The steps' CPU
// ranges end before their kernels do, and a step lasts until its last kernel ended.
TEST(KinetoRules, AGpuStepLastsUntilItsLastKernel) {
  TempDir dir;
  const json trace = rewrite(gpu_fixture(), [](json& e) {
    if (e["cat"] == "kernel")
      e["ts"] = e["ts"].get<double>() + 1000;
    return k_none;
  });
  const KinetoCalibration imported = import_json(dir, "late.json", trace);
  EXPECT_TRUE(has_line(imported,
                       "gpu        12 of 12 steps' kernels ended after their range on the CPU: "
                       "their wall time runs to their last kernel's end"));
  // A fixture step's range ends 16 us after its argmax operator starts (10 us of operator, a
  // 1 us gap, 5 us); the argmax kernel starts 3 us into the operator and lasts 2 + 0.01 B us, so
  // 1000 us later it ends 1005 + 0.01 B us after the operator's start: each step is 989 + 0.01 B
  // us longer (the last one's graph replay, 30 us after its argmax, 10 us less), all of it
  // residual: at batch 1, 989 us more, within the 10 us by which that one step bends the line.
  const KinetoCalibration on_time = import_json(dir, "on_time.json", gpu_fixture());
  const sim::OpFit* late = imported.profile.find("step.residual");
  const sim::OpFit* early = on_time.profile.find("step.residual");
  ASSERT_NE(late, nullptr);
  ASSERT_NE(early, nullptr);
  EXPECT_NEAR(late->predict_us(1, 1) - early->predict_us(1, 1), 989.01, 10.0);
}

// One GPU of a tensor-parallel pair, as vLLM's eager mode records it: per GPU 2 query heads and
// 1 K/V head of 16 (one fused q/k/v projection of 64), an MLP of 96 (gate and up fused, 192,
// then _C::silu_and_mul), a vocabulary of 50; d_model 64; 2 layers; every operator 10 us on the
// CPU. Each step is `sequences` prefills of `queries` tokens (decode when 1), flattened into one
// varlen batch of T tokens, under vLLM's execute_context_<n>(...)_generation_<m>(...) range.
class VllmTrace {
 public:
  void step(std::int64_t sequences, std::int64_t queries) {
    const std::int64_t t = sequences * queries;
    const double start = now_;
    now_ += 1;
    op("aten::embedding", {{50, 64}, {t}, {}, {}, {}});
    op("aten::masked_fill_", {{t, 64}, {t, 1}, {}});
    op("vllm::all_reduce", {{t, 64}, {}});  // the vocabulary-parallel embedding's
    for (int layer = 0; layer < 2; ++layer) {
      op(layer == 0 ? "_C::rms_norm" : "_C::fused_add_rms_norm", {{t, 64}, {t, 64}, {64}, {}});
      op("aten::linear", {{t, 64}, {64, 64}, {64}});
      op("aten::split_with_sizes", {{t, 64}, {}, {}});
      op("_C::rotary_embedding", {{t}, {t, 32}, {t, 16}, {}, {128, 16}, {}});
      op("_C_cache_ops::reshape_and_cache_flash",
         {{t, 1, 16}, {t, 1, 16}, {512, 16, 1, 16}, {512, 16, 1, 16}, {t}, {}, {}, {}});
      op("vllm::unified_attention_with_output",
         {{t, 2, 16}, {t, 1, 16}, {t, 1, 16}, {t, 2, 16}, {}, {}, {}});
      op("aten::linear", {{t, 32}, {64, 32}, {}});
      op("vllm::all_reduce", {{t, 64}, {}});
      op("_C::fused_add_rms_norm", {{t, 64}, {t, 64}, {64}, {}});
      op("aten::linear", {{t, 64}, {192, 64}, {}});
      op("_C::silu_and_mul", {{t, 96}, {t, 192}});
      op("aten::linear", {{t, 96}, {64, 96}, {}});
      op("vllm::all_reduce", {{t, 64}, {}});
    }
    op("_C::fused_add_rms_norm", {{t, 64}, {t, 64}, {64}, {}});
    op("aten::index", {{t, 64}, {}});
    op("aten::linear", {{sequences, 64}, {50, 64}, {}});
    op("vllm::all_gather", {{sequences, 50}, {}, {}, {}});
    op("aten::argmax", {{sequences, 100}, {}, {}});
    const bool decode = queries == 1;
    events_.push_back({{"ph", "X"},
                       {"cat", "user_annotation"},
                       {"name", fmt_range(decode ? 0 : sequences, decode ? sequences : 0, t)},
                       {"pid", 1},
                       {"tid", 1},
                       {"ts", start},
                       {"dur", now_ - start + 1}});
    now_ += 10;
  }
  json trace() const {
    return {{"traceEvents", events_}, {"distributedInfo", {{"rank", 0}, {"world_size", 2}}}};
  }

 private:
  static std::string fmt_range(std::int64_t prefills, std::int64_t decodes, std::int64_t t) {
    return "execute_context_" + std::to_string(prefills) + "(" +
           std::to_string(prefills > 0 ? t : 0) + ")_generation_" + std::to_string(decodes) + "(" +
           std::to_string(decodes) + ")";
  }
  void op(const std::string& name, const std::vector<std::vector<std::int64_t>>& dims) {
    json shapes = json::array();
    for (const auto& d : dims)
      shapes.push_back(d);
    events_.push_back({{"ph", "X"},
                       {"cat", "cpu_op"},
                       {"name", name},
                       {"pid", 1},
                       {"tid", 1},
                       {"ts", now_},
                       {"dur", 10},
                       {"args", {{"Input Dims", shapes}}}});
    now_ += 11;
  }
  json events_ = json::array();
  double now_ = 0;
};

// vLLM's ops by name: the fused q/k/v (64 = 2 x 16 queries + 2 x 16 for K and V: 1 K/V head),
// silu_and_mul (gated, half of 192), the varlen attention whose sequences the step's annotation
// gives (no cached prefix assumed, and said), two all-reduces a layer fitted as tp_all_reduce, and
// a world of 2 making the profile one GPU of TP 2 of a model of twice the heads, MLP and vocab.
TEST(KinetoRules, VllmOpsAndTensorParallelismAreRead) {
  TempDir dir;
  VllmTrace vllm;
  const std::vector<std::pair<int, int>> prompts = {{1, 16}, {2, 8}, {1, 32}, {4, 4},
                                                    {2, 24}, {3, 8}, {1, 64}, {2, 40}};
  for (const auto& [sequences, queries] : prompts)
    vllm.step(sequences, queries);
  const KinetoCalibration imported = import_json(dir, "vllm.json", vllm.trace());
  const sim::CostProfile& profile = imported.profile;
  EXPECT_EQ(profile.source.model_shape, "d64 h4/2x16 ffn192 v100 gated depth 2+0x0+0 lora -");
  EXPECT_EQ(profile.source.tensor_parallel, 2);
  EXPECT_EQ(steps_mapped(imported), 8);
  const sim::OpFit* all_reduce = profile.find("tp_all_reduce");
  ASSERT_NE(all_reduce, nullptr);
  EXPECT_EQ(all_reduce->samples + all_reduce->held_out, 8 * 2 * 2);  // steps x layers x 2
  // The most causal pairs: one prompt of 64 (64 x 65 / 2 = 2080; 2 x 40 makes 2 x 820 = 1640).
  const sim::OpFit* attention = profile.find("attention");
  ASSERT_NE(attention, nullptr);
  EXPECT_EQ(attention->context_max_seen, 2080);
  EXPECT_EQ(attention->batch_max_seen, 80);
  const auto starts = [&](const std::string& prefix) {
    return std::any_of(imported.report.begin(), imported.report.end(),
                       [&](const std::string& l) { return l.starts_with(prefix); });
  };
  EXPECT_TRUE(
      starts("assumed    vllm::unified_attention_with_output: 16 tokens read as 1 "
             "sequences (from the step's annotation)"));
  EXPECT_TRUE(starts("parallel   one GPU of 2 (distributedInfo.world_size, with 32 all-reduces"));
}

// A decode batch flattened into one varlen call: its keys (each sequence's context) are in no
// shape, so the steps are refused with that reason rather than priced at a guessed context.
TEST(KinetoRules, AVarlenDecodeWithoutItsContextIsRefused) {
  TempDir dir;
  VllmTrace vllm;
  vllm.step(4, 1);
  const std::string path = dir.write("decode.json", vllm.trace().dump());
  EXPECT_EQ(error_of([&] { calibrate_kineto(std::vector<std::string>{path}, {}); }),
            path +
                ": traceEvents: expected steps with an embedding and transformer layers, found "
                "none of 1 steps: 1 with a decode attention whose keys per sequence no shape "
                "gives (first: vllm::unified_attention_with_output at op 8 of step 0)");
}

// The fixture with its steps 6 to 11 (batches 3, 6, 12, 24, 5, 20) run as CUDA-graph replays,
// as a framework that captures its decodes runs them: no operator in the step, one
// cudaGraphLaunch 2 us in, three kernels back to back from 3 us in, each 10 + B us, and vLLM's
// annotation naming B decodes. Each such step lasts 3 + 3 (10 + B) = 33 + 3 B us (its CPU range,
// 10 us, ends before its kernels).
json with_graph_steps() {
  json trace = gpu_fixture();
  json events = json::array();
  std::vector<json> graph_steps;
  for (const json& e : trace["traceEvents"]) {
    const std::string name = e.value("name", "");
    if (e["cat"] == "user_annotation" && std::stoi(name.substr(13)) >= 6)
      graph_steps.push_back(e);
  }
  const auto in_graph_step = [&](const json& e) {
    return e.contains("ts") &&
           std::any_of(graph_steps.begin(), graph_steps.end(), [&](const json& g) {
             return g["ts"] <= e["ts"] && e["ts"] < g["ts"].get<double>() + g["dur"].get<double>();
           });
  };
  for (const json& e : trace["traceEvents"]) {
    if (!in_graph_step(e))
      events.push_back(e);
  }
  const std::vector<int> batches = {3, 6, 12, 24, 5, 20};
  for (std::size_t i = 0; i < graph_steps.size(); ++i) {
    json step = graph_steps[i];
    const double t = step["ts"];
    const int b = batches[i];
    const int correlation = 900000 + static_cast<int>(i);
    step["dur"] = 10;
    events.push_back(step);
    json range = step;
    range["name"] =
        "execute_context_0(0)_generation_" + std::to_string(b) + "(" + std::to_string(b) + ")";
    events.push_back(range);
    events.push_back({{"ph", "X"},
                      {"cat", "cuda_runtime"},
                      {"name", "cudaGraphLaunch"},
                      {"pid", step["pid"]},
                      {"tid", step["tid"]},
                      {"ts", t + 2},
                      {"dur", 4},
                      {"args", {{"correlation", correlation}}}});
    for (int k = 0; k < 3; ++k) {
      events.push_back({{"ph", "X"},
                        {"cat", "kernel"},
                        {"name", "graph_kernel"},
                        {"pid", 0},
                        {"tid", 7},
                        {"ts", t + 3 + k * (10 + b)},
                        {"dur", 10 + b},
                        {"args", {{"correlation", correlation}}}});
    }
  }
  trace["traceEvents"] = std::move(events);
  return trace;
}

// CUDA-graph decode steps are fitted whole (step.graph) against the decodes the annotation names,
// beside the eager steps that give the layers; a decode-only iteration is then priced as that fit
// of its sequences, and said so; a prefill is priced by the layers as before.
TEST(KinetoRules, GraphReplayedDecodeStepsArePricedWhole) {
  TempDir dir;
  const KinetoCalibration imported = import_json(dir, "graphs.json", with_graph_steps());
  EXPECT_EQ(steps_mapped(imported), 6);
  const sim::OpFit* graph = imported.profile.find("step.graph");
  ASSERT_NE(graph, nullptr);
  EXPECT_EQ(graph->samples + graph->held_out, 6);
  for (const double b : {1.0, 7.0, 24.0})
    EXPECT_NEAR(graph->predict_us(b, 0), 33 + 3 * b, 1e-6);
  EXPECT_TRUE(has_line(imported,
                       "graph      6 decode steps ran as CUDA-graph replays (batches 3, 5, 6, 12, "
                       "20, 24): fitted whole as step.graph against their sequences; simulations "
                       "price decode-only iterations from it, by their sequences alone (a graph's "
                       "attention context is in no shape)"));
  ModelShape model;
  model.d_model = 64;
  model.n_heads = 4;
  model.n_kv_heads = 2;
  model.head_dim = 16;
  model.ffn_dim = 128;
  model.vocab = 100;
  model.depth = DepthStructure::plain(1);
  ASSERT_EQ(imported.profile.source.model_shape, sim::model_fingerprint(model));
  const sim::CalibratedCostModel priced(imported.profile, "graphs.json", model);
  sim::BatchEntry decode{1, 40, 1, true};
  EXPECT_EQ(priced.iteration_cost(std::vector<sim::BatchEntry>(7, decode)).total,
            (33 + 3 * 7) * 1000);
  const std::vector<std::string> notes = priced.notes();
  EXPECT_NE(std::find(notes.begin(), notes.end(),
                      "cost_model.profile: step.graph: 1 distinct decode iterations priced as "
                      "whole CUDA-graph replays (measured at batches 3 to 24), by their "
                      "sequences alone: a graph's attention context is in no shape"),
            notes.end());
  sim::BatchEntry prompt{8, 0, 1, true};
  EXPECT_NE(priced.iteration_cost(std::vector<sim::BatchEntry>(1, prompt)).total,
            (33 + 3 * 1) * 1000);
}

}  // namespace
}  // namespace exitsim::analysis
