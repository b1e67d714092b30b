// `calibrate --kineto` on real serving engines' traces (../shared/profiles/kineto, README there:
// AMD's TraceLens test traces): SGLang's Qwen3-8B prefill on MI300X calibrates; vLLM's gpt-oss
// on B200 (fused experts) and its piecewise graph capture on MI300X are refused, each with the
// reason. Skipped when the traces are absent.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "exitsim/analysis/calibrate.hpp"
#include "exitsim/sim/cost/calibrated_cost_model.hpp"
#include "support/kineto_traces.hpp"
#include "support/test_files.hpp"

namespace exitsim::analysis {
namespace {

using test_support::error_of;

const std::string k_shared = std::string(EXITSIM_SOURCE_DIR) + "/../shared/profiles/kineto/";

#define SKIP_WITHOUT(file)                         \
  if (!std::filesystem::exists(k_shared + (file))) \
  GTEST_SKIP() << k_shared << (file) << " is absent (public traces, ../shared/profiles/kineto)"

// The two largest traces (tens of MiB of JSON once inflated) take 2.5 and 10 minutes to parse in
// an AddressSanitizer debug build; the release suite runs them, and the sanitizer suite's Kineto
// reader is exercised by the smaller traces and the fuzzer.
#if defined(__SANITIZE_ADDRESS__)
#define SKIP_UNDER_SANITIZER() \
  GTEST_SKIP() << "a large trace: run by the release suite, too slow under AddressSanitizer"
#else
#define SKIP_UNDER_SANITIZER() static_cast<void>(0)
#endif

// Qwen3-8B as published (hidden 4096, 36 layers, 32 heads and 8 K/V heads of 128, MLP 12288,
// vocabulary 151936): the model the trace's SGLang served.
ModelShape qwen3_8b() {
  ModelShape m;
  m.d_model = 4096;
  m.n_heads = 32;
  m.n_kv_heads = 8;
  m.head_dim = 128;
  m.ffn_dim = 12288;
  m.vocab = 151936;
  m.mlp = MlpKind::gated;
  m.depth = DepthStructure::plain(36);
  m.qk_norm = true;  // Qwen3's per-head q_norm and k_norm (SGLang's apply_qk_norm)
  return m;
}

// The step's time as the GPU ran it: from its step[...] range's start on the CPU to the end of the
// last kernel launched within the range (the CPU ran 465 ms ahead of the device).
double sglang_step_us(const nlohmann::json& trace) {
  double start = 0;
  double cpu_end = 0;
  std::map<std::int64_t, double> launches;  // correlation -> launch time
  for (const nlohmann::json& e : trace["traceEvents"]) {
    if (e.value("cat", "") == "user_annotation" && e.value("name", "").starts_with("step[EXTEND")) {
      start = e["ts"].get<double>();
      cpu_end = start + e["dur"].get<double>();
    }
  }
  for (const nlohmann::json& e : trace["traceEvents"]) {
    if (e.value("cat", "") == "cuda_runtime" && e.contains("args") &&
        e["args"].contains("correlation"))
      launches[e["args"]["correlation"].get<std::int64_t>()] = e["ts"].get<double>();
  }
  double end = cpu_end;
  for (const nlohmann::json& e : trace["traceEvents"]) {
    if (e.value("cat", "") != "kernel" && e.value("cat", "") != "gpu_memcpy")
      continue;
    const auto launch = launches.find(e["args"].value("correlation", std::int64_t{-1}));
    if (launch != launches.end() && launch->second >= start && launch->second < cpu_end)
      end = std::max(end, e["ts"].get<double>() + e["dur"].get<double>());
  }
  return end - start;
}

// One extend step of 15 prompts of 1024 tokens (the trace's annotation: execute_15360_context_15,
// sq15360 sk15360: no cached prefix) over 36 layers: every layer op has 36 calls, of which every
// fifth is held out (7) and the rest fitted (29). The step is the trace's only one: its error is
// in-sample; what is held out is layer calls, whose fits' held-out errors are asserted too.
TEST(KinetoFrameworks, SglangQwen3PrefillOnMi300xCalibrates) {
  SKIP_WITHOUT("sglang_mi300x_qwen3_8b_prefill_decode.json.gz");
  SKIP_UNDER_SANITIZER();
  const std::string path = k_shared + "sglang_mi300x_qwen3_8b_prefill_decode.json.gz";
  const KinetoCalibration imported = calibrate_kineto(std::vector<std::string>{path}, {});
  const sim::CostProfile& profile = imported.profile;
  EXPECT_EQ(profile.source.model_shape, sim::model_fingerprint(qwen3_8b()));
  EXPECT_EQ(profile.source.hardware, "AMD Instinct MI300X");
  // Prefill steps only: the layer ops are fitted under their own names (no ".prefill" twin).
  EXPECT_EQ(profile.find("attention.prefill"), nullptr);
  const sim::OpFit* attention = profile.find("attention");
  ASSERT_NE(attention, nullptr);
  EXPECT_EQ(attention->samples, 29);
  EXPECT_EQ(attention->held_out, 7);
  // 15 sequences of 1024 queries, no prefix: 15 x 1024 x 1025 / 2 causal pairs, the assumption
  // the import states (its shapes give the sequences, cu_seqlens [16], but not the prefix).
  EXPECT_EQ(attention->context_max_seen, 15 * 1024 * 1025 / 2);
  EXPECT_EQ(attention->batch_max_seen, 15360);
  const bool assumed = std::any_of(imported.report.begin(), imported.report.end(), [](auto& l) {
    return l.starts_with("assumed") && l.find("15 sequences") != std::string::npos;
  });
  EXPECT_TRUE(assumed);
  EXPECT_EQ(profile.notes, imported.report);
  double worst_held_out = 0;
  for (const sim::OpFit& op : profile.ops) {
    if (op.held_out > 0)
      worst_held_out = std::max(worst_held_out, op.held_out_mape);
  }
  const sim::CalibratedCostModel priced(profile, path, qwen3_8b());
  sim::BatchEntry prompt;
  prompt.query_tokens = 1024;
  prompt.depth = 36;
  prompt.emits_token = true;
  const double predicted_us =
      static_cast<double>(priced.iteration_cost(std::vector<sim::BatchEntry>(15, prompt)).total) /
      1e3;
  const double measured_us = sglang_step_us(test_support::read_trace_json(path));
  const double step_error = std::abs(predicted_us / measured_us - 1);
  std::printf(
      "sglang qwen3-8b: step %.1f ms measured, %.1f ms priced (%.2f%%, in-sample); "
      "worst held-out layer-call error %.1f%%\n",
      measured_us / 1e3, predicted_us / 1e3, 100 * step_error, 100 * worst_held_out);
  // Measured: 0.0% (one step: its residual is fitted to it) and 2.9% (kv_write): the
  // 36 layers' calls of one shape on a steady GPU differ by a few percent.
  EXPECT_LE(step_error, 0.01);
  EXPECT_LE(worst_held_out, 0.05);
}

// vLLM's gpt-oss (TP 8 on B200, eager): its experts run in one vllm::moe_forward whose inputs are
// the hidden states and the router's logits, [888, 3072] and [888, 128]: 128 experts, but their
// width and top-k are in no shape. Op 145 of the step: 121 set-up operators, the embedding's, the
// first layer's (torch.compile's region read through), then moe_forward.
TEST(KinetoFrameworks, VllmFusedExpertsAreRefusedWithTheReason) {
  SKIP_WITHOUT("vllm_b200_eager_tp8.json.gz");
  const std::string path = k_shared + "vllm_b200_eager_tp8.json.gz";
  EXPECT_EQ(error_of([&] { calibrate_kineto(std::vector<std::string>{path}, {}); }),
            path +
                ": traceEvents: expected steps with an embedding and transformer layers, found "
                "none of 1 steps: 1 with fused experts whose width and top-k no shape gives "
                "(first: vllm::moe_forward at op 145 of step 0)");
}

// A piecewise CUDA-graph capture records its kernels without running them (25 stream captures in
// the capture_8192_PIECEWISE range): there is no step time to calibrate from.
TEST(KinetoFrameworks, AGraphCaptureIsRefusedWithTheReason) {
  SKIP_WITHOUT("vllm_mi300x_piecewise_graph_capture.json.gz");
  SKIP_UNDER_SANITIZER();
  const std::string path = k_shared + "vllm_mi300x_piecewise_graph_capture.json.gz";
  EXPECT_EQ(error_of([&] { calibrate_kineto(std::vector<std::string>{path}, {}); }),
            path +
                ": traceEvents: expected steps with an embedding and transformer layers, found "
                "none of 1 steps: 1 that captured CUDA graphs (their kernels are recorded, not "
                "run: no step time) (first: step 0 (capture_8192_PIECEWISE))");
}

}  // namespace
}  // namespace exitsim::analysis
