// exitsim's roofline prices against public GPU measurements, as markdown tables (issue 42):
//   gpu_fidelity_report [GPU_DIR]    (default ../shared/gpu, run from the repository root)
// Per op family x GPU x TP: n, median, p10-p90 and min-max of exitsim / real over Vidur's
// points; the targets the tests in tests/fidelity assert; the decode-layer composites; TTFT
// against TensorRT-LLM's published figures; prefill attention against FlashAttention-3's.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "exitsim/analysis/gpu_fidelity.hpp"

namespace {

using namespace exitsim::analysis::gpu_fidelity;

std::string verdict(bool pass) {
  return pass ? "pass" : "**fail**";
}

std::string row(const RatioSummary& s) {
  return fmt::format("{} | {:.2f} | {:.2f}–{:.2f} | {:.2f}–{:.2f} | {:.0f}%", s.n, s.median, s.p10,
                     s.p90, s.min, s.max, 100 * s.share_within_band());
}

void print_families(const Comparison& cmp) {
  std::map<std::tuple<Family, Gpu, int, std::string>, std::vector<double>> groups;
  std::map<std::pair<Family, Gpu>, std::vector<double>> pools;
  for (const Point& p : cmp.points) {
    groups[{p.family, p.gpu, p.tensor_parallel, p.setting}].push_back(p.ratio());
    pools[{p.family, p.gpu}].push_back(p.ratio());
  }
  fmt::print("## Per op family, GPU and setting (Vidur)\n\n");
  fmt::print("| family | GPU | setting | n | median | p10–p90 | min–max | in {:.2f}–{:.2f} |\n",
             k_band_low, k_band_high);
  fmt::print("|---|---|---|---|---|---|---|---|\n");
  for (const auto& [key, ratios] : groups) {
    const auto& [family, gpu, tp, setting] = key;
    fmt::print("| {} | {} | {} | {} |\n", to_string(family), to_string(gpu), setting,
               row(summarize(ratios)));
  }
  fmt::print(
      "\n## Family targets (median {:.2f}–{:.2f}, at least {:.0f}% of points in "
      "{:.2f}–{:.2f})\n\n",
      k_median_low, k_median_high, 100 * k_band_share, k_band_low, k_band_high);
  fmt::print("| family | GPU | n | median | p10–p90 | min–max | in band | target |\n");
  fmt::print("|---|---|---|---|---|---|---|---|\n");
  for (const auto& [key, ratios] : pools) {
    const RatioSummary s = summarize(ratios);
    fmt::print("| {} | {} | {} | {} |\n", to_string(key.first), to_string(key.second), row(s),
               verdict(s.meets_family_target()));
  }
}

void print_layers(const std::string& dir) {
  std::vector<LayerPoint> points = decode_layer_llama2_7b(dir);
  for (LayerPoint& p : decode_layer_llama2_70b(dir))
    points.push_back(std::move(p));
  fmt::print(
      "\n## One decode layer, A100 (median within {:.2f}–{:.2f}, every point within "
      "{:.2f}–{:.2f})\n\n",
      k_whole_low, k_whole_high, k_layer_point_low, k_layer_point_high);
  if (points.empty()) {
    fmt::print("No composite: Vidur's A100 Llama-2 files are absent.\n");
    return;
  }
  fmt::print("| model | TP | contexts | batches | n | median | min–max | target |\n");
  fmt::print("|---|---|---|---|---|---|---|---|\n");
  // Rows per (model, TP) in the order the points come.
  std::vector<std::pair<std::string, int>> keys;
  for (const LayerPoint& p : points) {
    const auto key = std::pair{p.model, p.tensor_parallel};
    if (std::find(keys.begin(), keys.end(), key) == keys.end())
      keys.push_back(key);
  }
  for (const auto& [model, tp] : keys) {
    std::vector<double> ratios;
    std::vector<std::int64_t> contexts, batches;
    for (const LayerPoint& p : points) {
      if (p.model != model || p.tensor_parallel != tp)
        continue;
      ratios.push_back(p.ratio());
      if (std::find(contexts.begin(), contexts.end(), p.context) == contexts.end())
        contexts.push_back(p.context);
      if (std::find(batches.begin(), batches.end(), p.batch) == batches.end())
        batches.push_back(p.batch);
    }
    const RatioSummary s = summarize(ratios);
    const bool pass = s.median >= k_whole_low && s.median <= k_whole_high &&
                      s.min >= k_layer_point_low && s.max <= k_layer_point_high;
    fmt::print("| {} | {} | {} | {} | {} | {:.2f} | {:.2f}–{:.2f} | {} |\n", model, tp,
               fmt::join(contexts, ","), fmt::join(batches, ","), s.n, s.median, s.min, s.max,
               verdict(pass));
  }
  fmt::print(
      "\nLlama-2-7B attention: Vidur's A100 attention.csv as cited (not in ../shared/gpu); "
      "Llama-2-70B TP 4 and TP 8 attention: the TP 2 grid at B/2 and B/4 sequences (the same "
      "sequences x K/V heads per GPU).\n");
}

void print_ttft() {
  fmt::print(
      "\n## TTFT at batch 1 vs TensorRT-LLM (A100, within {:.2f}–{:.2f}; Llama-2-70B's 2048 tokens "
      "at TP 4 within 0.85–1.15, docs/cost_model.md \"Fidelity\")\n\n",
      k_whole_low, k_whole_high);
  fmt::print("| model | TP | prompt | real (ms) | exitsim (ms) | ratio | target |\n");
  fmt::print("|---|---|---|---|---|---|---|\n");
  for (const TtftPoint& p : ttft_tensorrt_llm()) {
    fmt::print("| {} | {} | {} | {:.0f} | {:.1f} | {:.2f} | {} |\n", p.figure.model,
               p.figure.tensor_parallel, p.figure.prompt_tokens, p.figure.ms, p.exitsim_ms,
               p.ratio(),
               verdict(p.ratio() >= ttft_low(p.figure) && p.ratio() <= ttft_high(p.figure)));
  }
  fmt::print("\nSource: {}.\n", k_tensorrt_llm_source);
}

void print_flash_attention() {
  fmt::print(
      "\n## Prefill attention vs FlashAttention (H100, causal, 16 heads x 128, 16k tokens "
      "per call; not asserted)\n\n");
  fmt::print(
      "| kernel | seq | real (TF/s) | exitsim (TF/s) | real (us) | exitsim (us) | ratio |\n");
  fmt::print("|---|---|---|---|---|---|---|\n");
  for (const FlashAttentionPoint& p : flash_attention_h100()) {
    fmt::print("| {} | {} | {:.0f} | {:.0f} | {:.0f} | {:.0f} | {:.2f} |\n", p.figure.kernel,
               p.figure.seq, p.figure.tflops, p.exitsim_tflops, p.real_us, p.exitsim_us, p.ratio());
  }
  fmt::print(
      "\nSource: {}. Real time = the paper's causal FLOPs (4 x batch x seq^2 x heads x "
      "head_dim / 2) at its rate; exitsim's TF/s = its own FLOP count over its kernel "
      "time. exitsim's op also writes the new K/V to the cache, which the benchmark does not.\n",
      k_flash_attention_source);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string dir = argc > 1 ? argv[1] : "../shared/gpu";
  try {
    fmt::print("# exitsim's roofline vs public GPU measurements\n\n");
    fmt::print(
        "Ratio = exitsim / real (below 1: exitsim is too fast); kernel time only, launch "
        "excluded (whole iterations for TTFT). Default efficiencies; presets a100-80gb "
        "and h100-sxm. Data: {}/vidur. Reproduce: `gpu_fidelity_report {}`.\n\n",
        dir, dir);
    const Comparison cmp = compare_vidur(dir);
    print_families(cmp);
    print_layers(dir);
    print_ttft();
    print_flash_attention();
    if (!cmp.notes.empty()) {
      fmt::print("\n## Left out\n\n");
      for (const std::string& note : cmp.notes)
        fmt::print("- {}\n", note);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpu_fidelity_report: %s\n", e.what());
    return 1;
  }
  return 0;
}
