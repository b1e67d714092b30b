// `calibrate --kineto` on real PyTorch measurements: traces that training/kineto_traces.py
// recorded with Debian's python3-torch on this machine class (tests/analysis/data/kineto), with
// PyTorch's own wall time per step beside them, including held-out steps of shapes the traces do
// not contain.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "exitsim/analysis/calibrate.hpp"
#include "exitsim/sim/cost/calibrated_cost_model.hpp"
#include "exitsim/traces/engine_ops.hpp"
#include "support/kineto_traces.hpp"
#include "support/test_files.hpp"

namespace exitsim::analysis {
namespace {

const std::string k_data = std::string(EXITSIM_SOURCE_DIR) + "/tests/analysis/data/kineto/";

nlohmann::json read_steps(const std::string& model) {
  std::ifstream in(k_data + model + ".steps.json");
  return nlohmann::json::parse(in);
}

// The model the script ran, from its own record (not from the trace).
ModelShape recorded_shape(const nlohmann::json& steps) {
  const nlohmann::json& s = steps["shape"];
  ModelShape shape;
  shape.name = steps["model"].get<std::string>();
  shape.d_model = s["d_model"];
  shape.n_heads = s["n_heads"];
  shape.n_kv_heads = s["n_kv_heads"];
  shape.head_dim = s["head_dim"];
  shape.ffn_dim = s["ffn_dim"];
  shape.vocab = s["vocab"];
  shape.mlp = MlpKind::gated;
  shape.depth.prelude_layers = s["prelude"];
  shape.depth.block_layers = s["block"];
  shape.depth.recursions = s["recursions"];
  shape.depth.coda_layers = s["coda"];
  return shape;
}

// The simulator's batch for one recorded step: `batch` sequences each prefilling its prompt, or
// each decoding one token over its context, at full depth.
std::vector<sim::BatchEntry> batch_of(const nlohmann::json& step, const ModelShape& shape) {
  const bool prefill = step["kind"] == "prefill";
  sim::BatchEntry entry;
  entry.query_tokens = prefill ? step["prompt_tokens"].get<std::int64_t>() : 1;
  entry.context_tokens = prefill ? 0 : step["context"].get<std::int64_t>();
  entry.depth = shape.depth.stacked_depth();
  entry.emits_token = true;
  return std::vector<sim::BatchEntry>(step["batch"].get<std::size_t>(), entry);
}

struct StepErrors {
  double median_profiled = 0;
  double median_unprofiled = 0;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 == 1 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

// The calibrated model's price of each held-out step against PyTorch's wall time for it.
StepErrors held_out_errors(const std::string& model) {
  const nlohmann::json steps = read_steps(model);
  const ModelShape shape = recorded_shape(steps);
  const std::vector<std::string> traces = {k_data + model + ".kineto.json.gz"};
  const KinetoCalibration imported = calibrate_kineto(traces, {});
  const sim::CalibratedCostModel priced(imported.profile, traces.front(), shape);
  std::vector<double> profiled;
  std::vector<double> unprofiled;
  for (const nlohmann::json& step : steps["held_out"]) {
    const double predicted_ms =
        static_cast<double>(priced.iteration_cost(batch_of(step, shape)).total) / 1e6;
    profiled.push_back(std::abs(predicted_ms / step["profiled_ms"].get<double>() - 1));
    unprofiled.push_back(std::abs(predicted_ms / step["unprofiled_ms"].get<double>() - 1));
  }
  return {median(profiled), median(unprofiled)};
}

TEST(Kineto, RecoversTheTinyRecursiveModelsShapeAndEveryLayerCall) {
  const nlohmann::json steps = read_steps("tiny");
  const std::vector<std::string> traces = {k_data + "tiny.kineto.json.gz"};
  const KinetoCalibration imported = calibrate_kineto(traces, {});
  const sim::CostProfile& profile = imported.profile;
  EXPECT_EQ(profile.source.model_shape, sim::model_fingerprint(recorded_shape(steps)));
  EXPECT_EQ(profile.source.model_shape, "d192 h6/2x32 ffn512 v256 gated depth 1+1x4+1 lora -");
  EXPECT_EQ(profile.source.engine, steps["framework"].get<std::string>());
  EXPECT_EQ(profile.source.backend, "cpu");
  // 24 steps of 6 executed layers (1 + 1 x 4 + 1): 8 prefill, 16 decode.
  std::int64_t prefill_steps = 0;
  std::int64_t prefill_tokens_max = 0;
  std::int64_t decode_batch_max = 0;
  std::int64_t decode_pairs_max = 0;
  for (const nlohmann::json& step : steps["calibration"]) {
    const std::int64_t batch = step["batch"];
    if (step["kind"] == "prefill") {
      ++prefill_steps;
      prefill_tokens_max =
          std::max(prefill_tokens_max, batch * step["prompt_tokens"].get<std::int64_t>());
    } else {
      decode_batch_max = std::max(decode_batch_max, batch);
      decode_pairs_max =
          std::max(decode_pairs_max, batch * (step["context"].get<std::int64_t>() + 1));
    }
  }
  const auto decode_steps = static_cast<std::int64_t>(steps["calibration"].size()) - prefill_steps;
  for (const std::string_view op : traces::engine_ops::layer) {
    SCOPED_TRACE(std::string(op));
    const sim::OpFit* decode = profile.find(std::string(op));
    const sim::OpFit* prefill = profile.find(std::string(op) + ".prefill");
    ASSERT_NE(decode, nullptr);
    ASSERT_NE(prefill, nullptr);
    EXPECT_EQ(decode->samples + decode->held_out, decode_steps * 6);
    EXPECT_EQ(prefill->samples + prefill->held_out, prefill_steps * 6);
    EXPECT_EQ(decode->batch_max_seen, decode_batch_max);
    EXPECT_EQ(prefill->batch_max_seen, prefill_tokens_max);
    EXPECT_EQ(decode->context_max_seen, decode_pairs_max);
  }
  const sim::OpFit* embed = profile.find("embed");
  ASSERT_NE(embed, nullptr);
  EXPECT_EQ(embed->samples + embed->held_out, 24);
  EXPECT_EQ(embed->batch_max_seen, prefill_tokens_max);
  ASSERT_NE(profile.find("lm_head"), nullptr);
  EXPECT_EQ(profile.find("lm_head")->batch_max_seen, decode_batch_max);
  ASSERT_NE(profile.find("step.residual"), nullptr);
}

TEST(Kineto, RecoversTheRandomPlainModelsShape) {
  const nlohmann::json steps = read_steps("random");
  const std::vector<std::string> traces = {k_data + "random.kineto.json.gz"};
  const KinetoCalibration imported = calibrate_kineto(traces, {"my machine", "my-model"});
  EXPECT_EQ(imported.profile.source.model_shape, sim::model_fingerprint(recorded_shape(steps)));
  EXPECT_EQ(imported.profile.source.model_shape,
            "d768 h12/4x64 ffn2048 v4096 gated depth 4+0x0+0 lora -");
  EXPECT_EQ(imported.profile.source.hardware, "my machine");
  EXPECT_EQ(imported.profile.source.model, "my-model");
}

// The target (docs/calibration.md): the calibrated model's price of steps it never saw within
// 10% of PyTorch's measured step time, at the median.
TEST(Kineto, PredictsHeldOutStepsOfTheTinyModel) {
  const StepErrors e = held_out_errors("tiny");
  RecordProperty("median_error_profiled", std::to_string(e.median_profiled));
  RecordProperty("median_error_unprofiled", std::to_string(e.median_unprofiled));
  std::printf("tiny: held-out steps' median error %.1f%% (profiled), %.1f%% (unprofiled)\n",
              100 * e.median_profiled, 100 * e.median_unprofiled);
  EXPECT_LE(e.median_profiled, 0.10);
}

TEST(Kineto, PredictsHeldOutStepsOfTheRandomModel) {
  const StepErrors e = held_out_errors("random");
  std::printf("random: held-out steps' median error %.1f%% (profiled), %.1f%% (unprofiled)\n",
              100 * e.median_profiled, 100 * e.median_unprofiled);
  EXPECT_LE(e.median_profiled, 0.10);
}

}  // namespace
}  // namespace exitsim::analysis

namespace exitsim::analysis {
namespace {

using test_support::error_of;
using test_support::TempDir;

// A GPU trace (hand-made in torch.profiler's CUDA schema, make_gpu_fixture.py): an op's time is
// its kernels' time, found through the runtime call's correlation id, not its CPU time (10 us
// for every operator there); a CUDA graph replay's kernels are nobody's and are reported.
TEST(Kineto, PricesGpuOpsByTheKernelsTheyLaunched) {
  const std::vector<std::string> traces = {k_data + "gpu_plain.kineto.json.gz"};
  const KinetoCalibration imported = calibrate_kineto(traces, {});
  const sim::CostProfile& profile = imported.profile;
  EXPECT_EQ(profile.source.backend, "cuda");
  EXPECT_EQ(profile.source.hardware, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(profile.source.model_shape, "d64 h4/2x16 ffn128 v100 gated depth 1+0x0+0 lora -");
  // Kernel lines of make_gpu_fixture.py, summed over each op's operators.
  const auto expect_line = [&](const char* op, double a, double b) {
    SCOPED_TRACE(op);
    const sim::OpFit* fit = profile.find(op);
    ASSERT_NE(fit, nullptr);
    for (const double batch : {1.0, 7.0, 32.0})
      EXPECT_NEAR(fit->predict_us(batch, 11 * batch), a + b * batch, 1e-6 * (a + b * batch));
  };
  expect_line("qkv_proj", 3 * 3.0, 3 * 0.10);
  expect_line("mlp.gate_up", 2 * 3.0, 2 * 0.10);
  expect_line("mlp.act", 2 * 1.0, 2 * 0.03);
  expect_line("kv_write", 2 * 1.5, 2 * 0.05);
  expect_line("attention", 4.0, 0.20);
  expect_line("lm_head", 2 * 1.0 + 5.0, 2 * 0.02 + 0.30);
  expect_line("sampling", 2.0, 0.01);
  bool reported = false;
  for (const std::string& line : imported.report)
    reported = reported || line.find("3 kernels (21 us)") != std::string::npos;
  EXPECT_TRUE(reported);
}

// Every malformed trace: one line naming the file and the key, nothing written.
TEST(Kineto, RefusesMalformedTracesNamingFileAndKey) {
  TempDir dir;
  const std::string op =
      R"({"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":0,"dur":1,)"
      R"("args":{"Input Dims":[[2,3],[3,4]]}})";
  const auto events = [](const std::string& list) { return R"({"traceEvents":[)" + list + "]}"; };
  struct Case {
    std::string content;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"", "expected a PyTorch profiler trace (Chrome trace JSON)"},
      {"{\"traceEvents\": [", "found invalid JSON at byte 18"},
      {R"([{"name":"aten::mm","ph":"X","ts":1,"dur":2,"tid":1,"pid":"CPU functions","args":{}}])",
       "the legacy autograd profiler's export"},
      {R"({"schemaVersion":1})", "traceEvents: expected a list of trace events, found none"},
      {R"({"traceEvents":{}})", "traceEvents: expected a list of trace events"},
      {events("3"), "traceEvents[0]: expected an event object, found 3"},
      {events(R"({"name":"x"})"), "traceEvents[0].ph: expected the event's phase as a string"},
      {events(R"({"ph":"X","cat":"cpu_op","pid":1,"tid":1,"ts":0,"dur":1})"),
       "traceEvents[0].name: expected a string, found none"},
      {events(R"({"ph":"X","cat":"cpu_op","name":"a","pid":1,"tid":1,"ts":"0","dur":1})"),
       "traceEvents[0].ts: expected a time in microseconds, found \"0\""},
      {events(R"({"ph":"X","cat":"cpu_op","name":"a","pid":1,"tid":1,"ts":0,"dur":-1})"),
       "traceEvents[0].dur: expected a number of microseconds >= 0, found -1"},
      {events(R"({"ph":"X","cat":"cpu_op","name":"a","tid":1,"ts":0,"dur":1})"),
       "traceEvents[0].pid: expected a process or thread id, found none"},
      {events(R"({"ph":"X","cat":"cpu_op","name":"a","pid":1,"tid":1,"ts":0,"dur":1,"args":3})"),
       "traceEvents[0].args: expected an object, found 3"},
      {events(R"({"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":0,"dur":1,)"
              R"("args":{"correlation":"7"}})"),
       "traceEvents[0].args.correlation: expected an integer, found \"7\""},
      {events(R"({"ph":"X","cat":"cpu_op","name":"a","pid":1,"tid":1,"ts":0,"dur":1,)"
              R"("args":{"Input Dims":5}})"),
       "traceEvents[0].args.Input Dims: expected a list of input shapes, found 5"},
      {events(R"({"ph":"X","cat":"cpu_op","name":"a","pid":1,"tid":1,"ts":0,"dur":1,)"
              R"("args":{"Input Dims":[[2,-3]]}})"),
       "traceEvents[0].args.Input Dims: expected sizes from 0 to 1099511627776, found -3"},
      {events(R"({"ph":"X","cat":"user_annotation","name":"ProfilerStep#0","pid":1,"tid":1,)"
              R"("ts":0,"dur":1})"),
       "traceEvents: expected CPU operator events (category cpu_op"},
      {events(R"({"ph":"X","cat":"cpu_op","name":"a","pid":1,"tid":1,"ts":0,"dur":1})"),
       "expected operator input shapes (torch.profiler with record_shapes=True), found none"},
      {events(op),
       "traceEvents: expected steps with an embedding and transformer layers, found none of 0 "
       "steps (no step ranges: from one aten::embedding to the next)"},
      {R"({"traceEvents":[)" + op + R"(],"distributedInfo":{"world_size":"8"}})",
       "distributedInfo.world_size: expected a number of processes from 1 to 65536, found "
       "\"8\""},
  };
  for (std::size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(cases[i].content);
    const std::string path = dir.write("t" + std::to_string(i) + ".json", cases[i].content);
    const std::string error =
        error_of([&] { calibrate_kineto(std::vector<std::string>{path}, {}); });
    EXPECT_TRUE(error.starts_with(path + ": ")) << error;
    EXPECT_NE(error.find(cases[i].expected), std::string::npos) << error;
    EXPECT_EQ(error.find('\n'), std::string::npos) << error;
  }
  // A gzip file cut short.
  std::ifstream gz(k_data + "tiny.kineto.json.gz", std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(gz)), std::istreambuf_iterator<char>());
  const std::string cut = dir.write("cut.json.gz", bytes.substr(0, bytes.size() / 2));
  const std::string error = error_of([&] { calibrate_kineto(std::vector<std::string>{cut}, {}); });
  EXPECT_TRUE(error.starts_with(cut + ": ")) << error;
  // Traces of two different models.
  const std::vector<std::string> two = {k_data + "tiny.kineto.json.gz",
                                        k_data + "random.kineto.json.gz"};
  const std::string mixed = error_of([&] { calibrate_kineto(two, {}); });
  EXPECT_NE(mixed.find("random.kineto.json.gz: ProfilerStep[0]: expected the model of the "
                       "earlier steps (d192 h6/2x32"),
            std::string::npos)
      << mixed;
}

}  // namespace
}  // namespace exitsim::analysis

#include <zlib.h>

namespace exitsim::analysis {
namespace {

using test_support::gpu_fixture;
using test_support::import_json;
using test_support::rewrite;
using test_support::steps_mapped;

const std::string k_gpu_shape = "d64 h4/2x16 ffn128 v100 gated depth 1+0x0+0 lora -";

// Without prof.step() a step runs from one embedding to the next: all 12 steps are mapped.
TEST(Kineto, StepsWithoutProfilerStepRangesRunFromEmbeddingToEmbedding) {
  TempDir dir;
  nlohmann::json trace = gpu_fixture();
  nlohmann::json kept = nlohmann::json::array();
  for (const nlohmann::json& e : trace["traceEvents"]) {
    if (e["cat"] != "user_annotation")
      kept.push_back(e);
  }
  trace["traceEvents"] = kept;
  const KinetoCalibration imported = import_json(dir, "no_steps.json", trace);
  EXPECT_EQ(imported.profile.source.model_shape, k_gpu_shape);
  EXPECT_EQ(steps_mapped(imported), 12);
}

// A rotary table's product after the projections ([B, hd/2, 1] x [B, 1, 1], as Hugging Face's
// per-layer rotary computes it) is no attention: its shapes do not match the projections.
TEST(Kineto, ARotaryTablesProductIsNotTheAttention) {
  TempDir dir;
  int linears = 0;
  const nlohmann::json trace = rewrite(gpu_fixture(), [&](nlohmann::json& e) {
    nlohmann::json extra = nlohmann::json::array();
    if (e["name"] == "aten::linear" && ++linears % 8 == 3) {  // after v_proj
      const std::int64_t batch = e["args"]["Input Dims"][0][0];
      nlohmann::json rotary = e;
      rotary["name"] = "aten::matmul";
      // In the 1 us gap the fixture leaves between operators: top level, not nested.
      rotary["ts"] = e["ts"].get<double>() + e["dur"].get<double>() + 0.25;
      rotary["dur"] = 0.5;
      rotary["args"] = {{"Input Dims", {{batch, 8, 1}, {batch, 1, 1}}}};
      extra.push_back(rotary);
    }
    return extra;
  });
  const KinetoCalibration imported = import_json(dir, "rotary.json", trace);
  EXPECT_EQ(imported.profile.source.model_shape, k_gpu_shape);
  EXPECT_EQ(steps_mapped(imported), 12);
}

// baddbmm(scores, q, k^T) (GPT-NeoX's attention): the product's operands are its 2nd and 3rd.
TEST(Kineto, ReadsABaddbmmAttentionFromItsProductsOperands) {
  TempDir dir;
  const nlohmann::json trace = rewrite(gpu_fixture(), [](nlohmann::json& e) {
    if (e["name"] == "aten::scaled_dot_product_attention") {
      const std::int64_t batch = e["args"]["Input Dims"][0][0];
      e["name"] = "aten::baddbmm";
      e["args"]["Input Dims"] = {{batch * 4, 1, 11}, {batch * 4, 1, 16}, {batch * 4, 16, 11}};
    }
    return nlohmann::json::array();
  });
  const KinetoCalibration imported = import_json(dir, "baddbmm.json", trace);
  EXPECT_EQ(imported.profile.source.model_shape, k_gpu_shape);
  EXPECT_EQ(steps_mapped(imported), 12);
}

// A third projection in the MLP without a router's top-k is neither a dense layer nor a mixture
// of experts: every step is skipped, and the trace is refused with the reason, rather than priced
// as a model it is not. Each step's operators: 0 embedding, 1-2 norm, 3-5 q/k/v, 6-9 rotary and
// cache, 10 attention, 11 transpose, 12 o_proj, 13-14 norm, 15 gate, 16 the extra projection,
// 17 silu, 18 up (the third projection from d_model), 19 mul, 20 down.
TEST(Kineto, SkipsLayersWhoseMlpIsNotDense) {
  TempDir dir;
  int linears = 0;
  const nlohmann::json trace = rewrite(gpu_fixture(), [&](nlohmann::json& e) {
    nlohmann::json extra = nlohmann::json::array();
    if (e["name"] == "aten::linear" && ++linears % 8 == 5) {  // after the gate projection
      nlohmann::json expert = e;
      expert["ts"] = e["ts"].get<double>() + e["dur"].get<double>() + 0.25;
      expert["dur"] = 0.5;
      extra.push_back(expert);
    }
    return extra;
  });
  const std::string error = error_of([&] { import_json(dir, "moe.json", trace); });
  EXPECT_NE(error.find("expected steps with an embedding and transformer layers, found none of "
                       "12 steps: 12 with an MLP of 3 projections from d_model and 1 back, "
                       "neither a dense MLP nor a routed mixture (no top-k) (first: aten::linear "
                       "at op 18 of step 0)"),
            std::string::npos)
      << error;
  EXPECT_EQ(error.find('\n'), std::string::npos) << error;
}

}  // namespace
}  // namespace exitsim::analysis

namespace exitsim::analysis {
namespace {

std::string kineto_error(const std::string& path) {
  return error_of([&] { calibrate_kineto(std::vector<std::string>{path}, {}); });
}

// N5: a 1 MB gzip of 1 GiB of spaces and an empty trace was inflated whole (3 GB, 27 s). It is
// inflated as it is parsed and stops at the 1 GiB cap. The file is one small gzip member of
// 1 MiB of spaces written 1,025 times (gzip readers inflate concatenated members as one stream).
TEST(Kineto, AGzipBombStopsAtTheInflatedCap) {
  test_support::TempDir dir;
  const std::string member_path = dir.path("member.gz");
  gzFile member = gzopen(member_path.c_str(), "wb9");
  const std::string spaces(1u << 20, ' ');
  gzwrite(member, spaces.data(), static_cast<unsigned>(spaces.size()));
  gzclose(member);
  std::ifstream in(member_path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::string bomb;
  for (int i = 0; i < 1025; ++i)
    bomb += bytes;
  const std::string path = dir.write("bomb.json.gz", bomb);
  ASSERT_LT(bomb.size(), 2u << 20);
  EXPECT_EQ(kineto_error(path),
            path + ": expected at most 1024 MiB of JSON once inflated, found more");
}

// N15: a key given twice was read last-wins in Kineto traces, refused in config.json.
TEST(Kineto, AKeyTwiceIsRefused) {
  test_support::TempDir dir;
  const std::string path = dir.write("twice.json", R"({"traceEvents": [{"ph": "X", "ph": "B"}]})");
  EXPECT_EQ(kineto_error(path),
            path + ": expected each key once per object, found the key \"ph\" again at byte 33");
}

// N1 through a Kineto trace: refused at the 33rd level.
TEST(Kineto, DeepNestingIsRefused) {
  test_support::TempDir dir;
  const std::string path =
      dir.write("deep.json", std::string(100000, '[') + std::string(100000, ']'));
  EXPECT_EQ(kineto_error(path),
            path + ": expected at most 32 levels of nesting, found deeper nesting at byte 33");
}

}  // namespace
}  // namespace exitsim::analysis
