// `calibrate --vidur-mlp` on Vidur's public profiles (../shared/gpu/vidur, skipped when absent):
// a decode step of Llama-2-7B on A100 priced from the imported profile at TP 1 and TP 4 against
// an independent sum of the files' medians (interpolated between token counts) and all-reduce
// rows; Llama-2-70B's attention grid imported for the model of its layer shape; and the mistakes
// a user can make, each refused in one line.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "exitsim/analysis/calibrate.hpp"
#include "exitsim/analysis/vidur.hpp"
#include "exitsim/core/presets.hpp"
#include "exitsim/sim/cost/calibrated_cost_model.hpp"
#include "exitsim/traces/engine_ops.hpp"
#include "support/test_files.hpp"

namespace exitsim::analysis {
namespace {

namespace ops = traces::engine_ops;
using test_support::error_of;
using test_support::shared_gpu_file;

const std::string k_mlp_7b = shared_gpu_file("vidur/a100_Llama-2-7b-hf_mlp.csv");
const std::string k_all_reduce = shared_gpu_file("vidur/a100_dgx_all_reduce.csv");

// Linear interpolation over (x, y) points in ascending x, duplicated x averaged.
double interpolate(std::map<double, std::vector<double>> points, double x) {
  std::vector<std::pair<double, double>> xy;
  for (const auto& [at, ys] : points) {
    double sum = 0;
    for (const double y : ys)
      sum += y;
    xy.emplace_back(at, sum / static_cast<double>(ys.size()));
  }
  const auto upper = std::lower_bound(xy.begin(), xy.end(), std::pair(x, -1e300));
  if (upper == xy.begin())
    return upper->second;
  if (upper == xy.end())
    return xy.back().second;
  if (upper->first == x)
    return upper->second;
  const auto& [x0, y0] = *(upper - 1);
  const auto& [x1, y1] = *upper;
  return y0 + (y1 - y0) * (x - x0) / (x1 - x0);
}

// The mlp.csv medians of one op at one TP degree, interpolated at `tokens`.
double vidur_op(const vidur::MlpProfile& mlp, const std::string& op, int tp, double tokens) {
  std::map<double, std::vector<double>> points;
  for (const vidur::ComputeTime& t : mlp.times) {
    if (t.op == op && t.tensor_parallel == tp)
      points[static_cast<double>(t.tokens)].push_back(t.median_us);
  }
  return interpolate(points, tokens);
}

// The all-reduce medians of `tp` GPUs in one node, interpolated at `bytes`.
double vidur_all_reduce(const std::vector<vidur::NetworkTime>& rows, int tp, double bytes) {
  std::map<double, std::vector<double>> points;
  for (const vidur::NetworkTime& r : rows) {
    if (r.workers == tp && r.devices_per_node == tp)
      points[static_cast<double>(r.size_bytes)].push_back(r.median_us);
  }
  return interpolate(points, bytes);
}

std::vector<sim::BatchEntry> decodes(int n, std::int64_t context) {
  sim::BatchEntry e;
  e.query_tokens = 1;
  e.context_tokens = context;
  e.depth = 32;
  e.emits_token = true;
  return std::vector<sim::BatchEntry>(static_cast<std::size_t>(n), e);
}

struct Decode {
  double layer_us = 0;  // one layer, all-reduces included
  double rest_us = 0;   // embedding, LM head, logits gather, sampling
  double step_us() const { return 32 * layer_us + rest_us; }
};

// A decode step of `b` sequences at `context` from the files alone: per layer Vidur's ops at b
// tokens (the residual add twice), the roofline's decode attention (no attention file for 7B),
// two all-reduces of b x 4096 bf16 values; once, emb and the roofline's head, gather and sampling.
Decode independent(const vidur::MlpProfile& mlp, const std::vector<vidur::NetworkTime>& network,
                   int tp, int b, std::int64_t context) {
  const ModelShape model = *find_model_preset("llama-2-7b");
  const sim::RooflineCostModel roofline(model, *find_hardware_preset("a100-80gb"),
                                        sim::RooflineEfficiency{}, {tp, 1, 1});
  const auto x = [&](sim::BatchFeature f) { return sim::feature_index(f); };
  sim::BatchFeatures f{};
  f[x(sim::BatchFeature::tokens)] = b;
  f[x(sim::BatchFeature::decode_seqs)] = b;
  f[x(sim::BatchFeature::decode_kv)] = static_cast<double>(b * (context + 1));
  f[x(sim::BatchFeature::emitting)] = b;
  const auto roofline_us = [&](sim::OpKind kind) {
    return roofline.op_cost(kind, f).duration_ns / 1000;
  };
  Decode d;
  for (const char* op : {"input_layernorm", "attn_pre_proj", "attn_rope", "attn_post_proj",
                         "post_attention_layernorm", "mlp_up_proj", "mlp_act", "mlp_down_proj"})
    d.layer_us += vidur_op(mlp, op, tp, b);
  d.layer_us += 2 * vidur_op(mlp, "add", tp, b) + roofline_us(sim::OpKind::attention_decode);
  if (tp > 1)
    d.layer_us += 2 * vidur_all_reduce(network, tp, b * 4096.0 * 2);
  d.rest_us = vidur_op(mlp, "emb", tp, b) + roofline_us(sim::OpKind::final_norm) +
              roofline_us(sim::OpKind::lm_head) + roofline_us(sim::OpKind::sampling);
  if (tp > 1)
    d.rest_us += roofline_us(sim::OpKind::logits_gather);
  return d;
}

VidurInputs llama_2_7b(int tp) {
  VidurInputs in;
  in.mlp = k_mlp_7b;
  in.all_reduce = tp > 1 ? k_all_reduce : "";
  in.model = "llama-2-7b";
  in.hardware = "a100-80gb";
  in.tensor_parallel = tp;
  return in;
}

TEST(VidurImport, PricesLlama2SevenBDecodeAtTp1AndTp4AsTheFilesSay) {
  EXITSIM_SKIP_UNLESS_EXISTS(k_mlp_7b);
  EXITSIM_SKIP_UNLESS_EXISTS(k_all_reduce);
  const ModelShape model = *find_model_preset("llama-2-7b");
  const VidurCalibration tp1 = calibrate_vidur(llama_2_7b(1));
  const VidurCalibration tp4 = calibrate_vidur(llama_2_7b(4));
  EXPECT_EQ(tp1.profile.source.tensor_parallel, 1);
  EXPECT_EQ(tp4.profile.source.tensor_parallel, 4);
  EXPECT_EQ(tp4.profile.source.hardware, "a100-80gb");
  EXPECT_EQ(tp4.profile.find(std::string(ops::tp_all_reduce))->measured_by, "grid");
  EXPECT_EQ(tp4.profile.find(std::string(ops::lm_head))->measured_by, "roofline");
  EXPECT_EQ(tp1.profile.find(std::string(ops::tp_all_reduce)), nullptr);
  EXPECT_TRUE(untrusted_fits(tp4.profile).empty()) << untrusted_fits(tp4.profile).front();

  const sim::CalibratedCostModel one(tp1.profile, "tp1.json", model);
  const sim::CalibratedCostModel four(tp4.profile, "tp4.json", model,
                                      {{4, 1, 1}, *find_hardware_preset("a100-80gb"), {}});
  const vidur::MlpProfile mlp = vidur::read_mlp(k_mlp_7b);
  const std::vector<vidur::NetworkTime> network = vidur::read_network(k_all_reduce);
  // 32 sequences (a token count of the grid) and 20 (between its 16 and 24).
  for (const int b : {32, 20}) {
    const std::vector<sim::BatchEntry> batch = decodes(b, 1024);
    const Decode want1 = independent(mlp, network, 1, b, 1024);
    const Decode want4 = independent(mlp, network, 4, b, 1024);
    const double got1 = static_cast<double>(one.iteration_cost(batch).total) / 1000;
    const double got4 = static_cast<double>(four.iteration_cost(batch).total) / 1000;
    // Per layer within 3%: the octave fits' error on these points, far below TP's effect.
    const double layer1 = (got1 - want1.rest_us) / 32;
    const double layer4 = (got4 - want4.rest_us) / 32;
    constexpr double k_tolerance = 0.03;
    EXPECT_NEAR(layer1, want1.layer_us, k_tolerance * want1.layer_us) << "batch " << b;
    EXPECT_NEAR(layer4, want4.layer_us, k_tolerance * want4.layer_us) << "batch " << b;
    EXPECT_GT(want1.layer_us / want4.layer_us, 1 + 10 * k_tolerance) << "batch " << b;
    // TP 4 saves what the files say it saves.
    EXPECT_NEAR(got1 - got4, want1.step_us() - want4.step_us(),
                k_tolerance * (want1.step_us() - want4.step_us()))
        << "batch " << b;
  }
  const std::vector<sim::BatchEntry> batch = decodes(32, 1024);
  const Decode want1 = independent(mlp, network, 1, 32, 1024);
  const Decode want4 = independent(mlp, network, 4, 32, 1024);
  // A decode step of 32 at context 1024 from the files: TP 1 20.8 ms (per layer 304 us of
  // Vidur's ops and the roofline's decode attention over 32 x 1025 keys), TP 4 10.6 ms (with 2 x
  // 62 us of all-reduce per layer: Vidur's NCCL at 256 KiB).
  EXPECT_NEAR(want1.step_us(), 20800, 200);
  EXPECT_NEAR(want4.step_us(), 10610, 100);
  const auto roofline_ms = [&](int tp) {
    const sim::RooflineCostModel roofline(model, *find_hardware_preset("a100-80gb"),
                                          sim::RooflineEfficiency{}, {tp, 1, 1});
    return static_cast<double>(roofline.iteration_cost(batch).total) / 1e6;
  };
  std::cout << fmt::format(
      "Llama-2-7B on A100, a decode step of 32 at context 1024: calibrated TP 1 {:.2f} ms, TP 4 "
      "{:.2f} ms (files: {:.2f}, {:.2f}); roofline TP 1 {:.2f} ms, TP 4 {:.2f} ms\n",
      static_cast<double>(one.iteration_cost(batch).total) / 1e6,
      static_cast<double>(four.iteration_cost(batch).total) / 1e6, want1.step_us() / 1000,
      want4.step_us() / 1000, roofline_ms(1), roofline_ms(4));
  // The simulation names what the roofline priced.
  const std::string note = four.notes().back();
  EXPECT_NE(note.find("measured by vidur: attn_norm, embed, mlp.act, mlp.down, mlp.gate_up, "
                      "mlp_norm, o_proj, qkv_proj, rotary, tp_all_reduce; fitted to exitsim's "
                      "roofline when the profile was made, not measured: attention, kv_write, "
                      "lm_head, sampling; not in the profile, priced by the roofline: the logits "
                      "gather"),
            std::string::npos)
      << note;
}

TEST(VidurImport, ImportsLlama2SeventyBAttentionForTheModelOfItsLayerShape) {
  const std::string mlp = shared_gpu_file("vidur/a100_Meta-Llama-3-70B_mlp.csv");
  const std::string attention = shared_gpu_file("vidur/a100_old_attention_70b_tp2.csv");
  EXITSIM_SKIP_UNLESS_EXISTS(mlp);
  EXITSIM_SKIP_UNLESS_EXISTS(attention);
  // Llama-2-70B's attention (8192 wide, 64 q / 8 kv heads) is Llama-3.1-70B's; the file has no
  // vocab column, and Meta-Llama-3-70B's mlp.csv is the preset's whole shape.
  VidurInputs in;
  in.mlp = mlp;
  in.attention = attention;
  in.model = "llama-3.1-70b";
  in.hardware = "a100";
  in.tensor_parallel = 2;
  const VidurCalibration imported = calibrate_vidur(in);
  const sim::OpFit* decode = imported.profile.find(std::string(ops::attention));
  const sim::OpFit* prefill =
      imported.profile.find(std::string(ops::attention) + std::string(ops::prefill_suffix));
  ASSERT_NE(decode, nullptr);
  ASSERT_NE(prefill, nullptr);
  EXPECT_EQ(decode->measured_by, "grid");
  EXPECT_EQ(decode->samples + decode->held_out, 10112);  // 128 batches x 79 contexts
  // One linear model per batch octave follows decode attention to within 10% (median,
  // held out); prefill closer.
  EXPECT_LT(decode->held_out_median_ape, 0.10);
  EXPECT_LT(prefill->held_out_median_ape, 0.05);
  // Line 4001: 32 sequences after 1024 cached tokens, 0.064 ms + 0.002 ms of reshapes.
  EXPECT_NEAR(decode->predict_us(32, 32 * 1025), 66, 0.15 * 66);
  // Line 12687: a 1024-token prefill with nothing cached, 0.216 ms (no reshape time).
  EXPECT_NEAR(prefill->predict_us(1024, 1024 * 1025 / 2), 216, 0.10 * 216);
  // No attn_kv_cache_save column: the K/V write comes from the roofline's memory rule.
  EXPECT_EQ(imported.profile.find(std::string(ops::kv_write))->measured_by, "roofline");
  const auto said = [&](const std::string& text) {
    return std::any_of(
        imported.report.begin(), imported.report.end(),
        [&](const std::string& line) { return line.find(text) != std::string::npos; });
  };
  EXPECT_TRUE(said("kv_write   not in the attention file (no attn_kv_cache_save column)"));
  EXPECT_TRUE(said("hardware   a100-80gb (Vidur's a100 is exitsim's a100-80gb)"));

  // Llama-2-7B's shape is not the attention file's.
  VidurInputs other = llama_2_7b(2);
  other.attention = attention;
  EXPECT_EQ(error_of([&] { calibrate_vidur(other); }),
            attention +
                ": --model-name: expected attention of llama-2-7b's shape (n_embd 4096, n_q_head "
                "32, n_kv_head 32), found n_embd 8192, n_q_head 64, n_kv_head 8");
}

TEST(VidurImport, RefusesAModelHardwareOrDegreeTheFilesDoNotHave) {
  EXITSIM_SKIP_UNLESS_EXISTS(k_mlp_7b);
  VidurInputs in = llama_2_7b(1);
  in.model = "llama-3-8b";
  EXPECT_EQ(error_of([&] { calibrate_vidur(in); }),
            k_mlp_7b +
                ": --model-name: expected a model of Vidur's shape (presets of Vidur's shape: "
                "llama-2-7b, layerskip-llama-2-7b), found llama-3-8b with n_kv_heads 8 (Vidur's "
                "n_kv_head 32), ffn_dim 14336 (Vidur's n_expanded_embd 11008)");
  in.model = "llama-2-70b";
  EXPECT_NE(error_of([&] { calibrate_vidur(in); })
                .find("--model-name: expected an exitsim model preset of the profile's shape "
                      "(presets of Vidur's shape: llama-2-7b, layerskip-llama-2-7b), found "
                      "\"llama-2-70b\""),
            std::string::npos);
  in = llama_2_7b(1);
  in.hardware = "v100";
  EXPECT_NE(error_of([&] {
              calibrate_vidur(in);
            }).find("--hardware: expected an exitsim hardware preset (h100-sxm, "),
            std::string::npos);
  in = llama_2_7b(3);
  EXPECT_NE(error_of([&] { calibrate_vidur(in); }).find("--tensor-parallel: expected"),
            std::string::npos);
  const std::string pairwise = shared_gpu_file("vidur/a100_pairwise_nvlink_all_reduce.csv");
  EXITSIM_SKIP_UNLESS_EXISTS(pairwise);
  in = llama_2_7b(8);
  in.all_reduce = pairwise;
  EXPECT_EQ(error_of([&] { calibrate_vidur(in); }),
            pairwise +
                ": num_workers: expected all_reduce rows of 8 GPUs in one node (num_workers = "
                "devices_per_node = 8), found 2 GPUs 2 per node, 4 GPUs 4 per node");
}

TEST(VidurImport, RefusesADegreeTheMlpFileLacksAndNamesAShapeNoPresetHas) {
  test_support::TempDir dir;
  std::string header;
  std::string row;
  for (const char* op :
       {"emb", "input_layernorm", "attn_pre_proj", "attn_rope", "attn_post_proj",
        "post_attention_layernorm", "mlp_up_proj", "mlp_act", "mlp_down_proj", "add"}) {
    header += fmt::format("time_stats.{0}.min,time_stats.{0}.max,time_stats.{0}.median,", op);
    row += "0.001,0.003,0.002,";
  }
  header +=
      "n_head,n_kv_head,n_embd,n_expanded_embd,vocab_size,use_gated_mlp,num_tokens,"
      "num_tensor_parallel_workers\n";
  const std::string path = dir.write("mlp.csv", header + row + "32,32,4096,11008,32000,True,1,1\n" +
                                                    row + "32,32,4096,11008,32000,True,2,1\n");
  VidurInputs in;
  in.mlp = path;
  in.model = "llama-2-7b";
  in.hardware = "a100-80gb";
  in.tensor_parallel = 2;
  EXPECT_EQ(error_of([&] { calibrate_vidur(in); }),
            path +
                ": num_tensor_parallel_workers: expected rows at --tensor-parallel 2, found "
                "rows at TP 1 only");
  in.tensor_parallel = 1;
  EXPECT_NO_THROW(calibrate_vidur(in));

  const std::string odd = dir.write("odd.csv", header + row + "48,8,6144,20000,32000,True,1,1\n");
  in.mlp = odd;
  const std::string error = error_of([&] { calibrate_vidur(in); });
  EXPECT_NE(error.find("(no exitsim preset has Vidur's shape (n_embd 6144, n_head 48, n_kv_head "
                       "8, n_expanded_embd 20000, use_gated_mlp True); presets: llama-3-8b, "
                       "llama-2-7b,"),
            std::string::npos)
      << error;
}

}  // namespace
}  // namespace exitsim::analysis
