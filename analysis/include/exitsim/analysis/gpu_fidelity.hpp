#pragma once

// exitsim's roofline prices against public GPU measurements (issue 42): the comparison of
// ../shared/findings/gpu-fidelity-3.md made repeatable, shared by the fidelity tests
// (tests/fidelity) and the report (bench/gpu_fidelity_report.cpp).
//
// Every measured op is priced as one GPU's tensor-parallel shard of the same op at the same shape
// on the matching hardware preset (Vidur's a100 <-> `a100-80gb`, h100 <-> `h100-sxm`) by
// RooflineCostModel with default efficiencies: the op of layer 0 in op_breakdown, kernel time
// only (duration_ns - launch_ns), since Vidur's times are GPU kernel times with no launch gap.
// Nothing here knows what the roofline charges: the comparison reports ratios exitsim / real
// (below 1: exitsim is too fast), whatever the prices are.

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "exitsim/core/hardware.hpp"

namespace exitsim::analysis::gpu_fidelity {

enum class Gpu : std::uint8_t { a100, h100 };
std::string_view to_string(Gpu gpu);
// The exitsim hardware preset that stands for Vidur's GPU: "a100-80gb" or "h100-sxm".
std::string_view hardware_preset(Gpu gpu);

// Op families, each judged on its own.
enum class Family : std::uint8_t {
  gemm,               // qkv_projection, output_projection, mlp_gate_up, mlp_down
  elementwise,        // input_norm, post_attention_norm, mlp_activation
  decode_attention,   // attention_decode
  prefill_attention,  // attention_prefill
  all_reduce,         // tp_all_reduce
  send_recv,          // the pipeline hand-off between two stages
};
inline constexpr std::array<Family, 6> k_families = {
    Family::gemm,       Family::elementwise, Family::decode_attention, Family::prefill_attention,
    Family::all_reduce, Family::send_recv};
std::string_view to_string(Family family);

// One measured point beside exitsim's price of the same work.
struct Point {
  Family family = Family::gemm;
  Gpu gpu = Gpu::a100;
  int tensor_parallel = 1;
  // The group the report gives a row: "TP 2"; for send_recv "1 node" or "2 nodes".
  std::string setting;
  std::string op;      // exitsim's op ("qkv_projection", ..., "pipeline_hand_off")
  std::string shape;   // e.g. "Llama-2-7b-hf T=128", "B=4 C=1024", "P=512 C=0", "S=2048 B"
  std::string source;  // the Vidur file's name
  double real_us = 0;  // Vidur's median (averaged over duplicated grid points)
  double exitsim_us = 0;

  double ratio() const { return exitsim_us / real_us; }
};

struct Comparison {
  std::vector<Point> points;
  // Files and rows left out, and why (one line each).
  std::vector<std::string> notes;
};

// Which points to compute (unset: all). Only the files that give the selected points are read.
struct Selection {
  std::optional<Gpu> gpu;
  std::optional<Family> family;
};

// Every point of the Vidur files in `gpu_dir`/vidur (../shared/gpu), by file name:
// - `<gpu>_<model>_mlp.csv`: the four GEMMs and the three element-wise ops at each token count T
//   and TP degree (one prefill entry of T tokens; T = 1 a decode entry at context 1). The model is
//   the file's columns (head_dim = n_embd / n_head, bf16, one layer: only layer 0 is priced).
//   Vidur times the norm without the residual add and the add apart, once (after the MLP); both
//   adds of a layer are the same size, so input_norm and post_attention_norm each stand for the
//   norm's time plus the add's. attn_rope and emb have no exitsim op and are not compared.
// - `<gpu>_*attention*.csv`: decode rows (B decode entries at context kv_cache) and prefill rows
//   (one entry of prefill_chunk tokens after kv_cache), real = the attention kernel + the two
//   reshape copies + the K/V cache save where the file has it (exitsim's attention op writes the
//   new K/V).
// - `<gpu>_dgx_all_reduce.csv`: the rows of one node (devices_per_node == workers), each priced as
//   the layer's tp_all_reduce at TP = workers of S / (2 x 512) tokens of a 512-wide model, which
//   sends exactly S bytes (Vidur's sizes are 2048 + 8192k bytes; the collective's price depends
//   on its bytes and TP only).
// - `<gpu>_dgx_send_recv.csv`: two workers, one node (devices_per_node 2) or two (1), each priced
//   as the hand-off of a PP 2 replica of a 512-wide model (2 x 512 x 2 bytes per token: hidden
//   state and residual, as vLLM sends them) of S / 2048 tokens: iteration_cost of the PP 2
//   replica minus that of the PP 1 replica, less the hand-off's launch (their `overhead`
//   difference). Across nodes the preset's gpus_per_node is set to 1.
// The pairwise-NVLink files (PCIe boards with NVLink bridges, not the SXM presets) and the CPU
// overheads are left out with a note. Duplicated grid points are averaged. Throws InputError for
// a malformed file (from the Vidur reader); a missing directory gives no points and a note.
Comparison compare_vidur(const std::string& gpu_dir, const Selection& selection = {});

// One GPU's profile in Vidur's formats, named by the user (`exitsim calibrate --fit-hardware`):
// mlp.csv files (a model each; its name in the points is the file's stem), attention.csv files,
// and the network files (empty: none).
struct ProfileFiles {
  std::vector<std::string> mlp;
  std::vector<std::string> attention;
  std::string all_reduce;
  std::string send_recv;
};
// compare_vidur's points for these files, priced on `hardware` (not a preset) and labelled
// `label`: the families `selection` names (its gpu is ignored).
Comparison compare_profile(const ProfileFiles& files, const HardwareSpec& hardware, Gpu label,
                           const Selection& selection = {});

// The targets, shared by the tests and the report.
inline constexpr double k_median_low = 0.90;  // median ratio of a family on a GPU
inline constexpr double k_median_high = 1.10;
inline constexpr double k_band_low = 0.75;  // at least k_band_share of the points within
inline constexpr double k_band_high = 1.33;
inline constexpr double k_band_share = 0.90;
inline constexpr double k_whole_low = 0.90;  // a decode layer's median, and TTFT
inline constexpr double k_whole_high = 1.10;
// Every decode-layer point of a model and TP degree: the bound the data supports (the worst
// points, 0.82-0.89, are 70B TP 4 at 8-16 sequences, whose attention is read off the TP 2 grid
// at half the batch, and the smallest 70B TP 2 batches, where Vidur's all-reduces are noisiest).
inline constexpr double k_layer_point_low = 0.80;
inline constexpr double k_layer_point_high = 1.20;

// Ratios summarised: percentiles by linear interpolation between order statistics (numpy's
// default), NaN for an empty set.
struct RatioSummary {
  std::size_t n = 0;
  double median = 0, p10 = 0, p90 = 0, min = 0, max = 0;
  std::size_t within_band = 0;  // in [k_band_low, k_band_high]

  double share_within_band() const {
    return n == 0 ? 0.0 : static_cast<double>(within_band) / static_cast<double>(n);
  }
  // The family target: median in [k_median_low, k_median_high], k_band_share within the band.
  bool meets_family_target() const;
  // "n 320, median 0.91, p10-p90 0.85-0.97, min-max 0.59-1.05, 93% in 0.75-1.33".
  std::string describe() const;
};
RatioSummary summarize(std::span<const double> ratios);
std::vector<double> ratios_of(std::span<const Point> points);

// One decode layer: the sum of Vidur's measured ops of a layer at batch B (every mlp.csv op at
// T = B, attn_rope and the add counted twice (both residuals) included, emb not) + decode
// attention at (B, C) + two all-reduces of B x n_embd x 2 bytes when TP > 1 (Vidur's one-node
// medians interpolated linearly in size), against exitsim's layer 0 for B decode entries at
// context C: the sum of the kernel times (duration - launch) of every launched op of the layer,
// the all-reduces included (at TP 1 the layer is one chain, so this is its critical path less its
// launches; under TP the all-reduces are on that path too).
struct LayerPoint {
  std::string model;  // "Llama-2-70B", "Llama-2-7B"
  Gpu gpu = Gpu::a100;
  int tensor_parallel = 1;
  std::int64_t batch = 0, context = 0;
  double real_us = 0, exitsim_us = 0;
  double attention_us = 0;  // the part of real_us that is attention (with its source below)
  std::string attention_source;

  double ratio() const { return exitsim_us / real_us; }
};
// The batches and contexts of the 70B composite: batches 1-128 in powers of two, contexts of
// Vidur's decode grid from short to its longest.
inline constexpr std::array<std::int64_t, 8> k_layer_batches = {1, 2, 4, 8, 16, 32, 64, 128};
inline constexpr std::array<std::int64_t, 5> k_layer_contexts = {128, 512, 1024, 2048, 4032};
// Llama-2-70B on A100 at TP 2, 4 and 8 (a100_Llama-2-70b-hf_mlp.csv,
// a100_old_attention_70b_tp2.csv, a100_dgx_all_reduce.csv). Vidur's attention grid is the TP 2
// shard only (32 q / 4 K/V heads); a TP t shard at B sequences (64/t q, 8/t K/V heads) does the
// same work as the TP 2 shard at B x 2 / t sequences, so TP 4 reads the grid at B / 2 and TP 8 at
// B / 4 (an approximation: one kernel over fewer, longer head rows; batches that do not divide
// are left out). Empty when a file is missing.
std::vector<LayerPoint> decode_layer_llama2_70b(const std::string& gpu_dir);

// Vidur's A100 decode attention of Llama-2-7B at TP 1 (32 heads), attn_decode medians quoted by
// ../shared/findings/gpu-fidelity-3.md from microsoft/vidur's
// data/profiling/compute/a100/meta-llama/Llama-2-7b-hf/attention.csv as copied in
// sw5sh/cs378-assignment3@7ac2fe9fb6cea9d4630659a10c5cccfc9fbdd776 (same byte size as Vidur's
// blob; not hash-verified). No 7B attention file is in ../shared/gpu.
struct CitedAttention {
  std::int64_t batch = 0, context = 0;
  double us = 0;
};
inline constexpr std::array<CitedAttention, 4> k_vidur_llama2_7b_a100_decode_attention = {{
    {64, 2048, 1186.0},
    {64, 32, 97.0},
    {1, 32, 9.0},
    {80, 32, 120.0},
}};
// Llama-2-7B on A100 at TP 1 at those four points (a100_Llama-2-7b-hf_mlp.csv). Empty when the
// file is missing.
std::vector<LayerPoint> decode_layer_llama2_7b(const std::string& gpu_dir);

// TensorRT-LLM's published A100 fp16 batch-1 first-token latency (v0.5, "Low latency" table):
// NVIDIA/TensorRT-LLM docs/source/performance.md @138f96d45f90b9667426f7c47297d8c06bafac73.
inline constexpr const char* k_tensorrt_llm_source =
    "NVIDIA/TensorRT-LLM docs/source/performance.md @138f96d (v0.5, A100 fp16, batch 1)";
struct TtftFigure {
  const char* model;  // "Llama-2-7B", "Llama-2-70B"
  int tensor_parallel;
  std::int64_t prompt_tokens;
  double ms;
};
inline constexpr std::array<TtftFigure, 4> k_tensorrt_llm_ttft = {{
    {"Llama-2-7B", 1, 128, 16.0},
    {"Llama-2-7B", 1, 2048, 133.0},
    {"Llama-2-70B", 4, 128, 47.0},
    {"Llama-2-70B", 4, 2048, 377.0},
}};
struct TtftPoint {
  TtftFigure figure{};
  double exitsim_ms = 0;

  double ratio() const { return exitsim_ms / figure.ms; }
};
// exitsim's TTFT of each figure: iteration_cost (total, launches included) of one prefill entry
// of the prompt that emits a token (LM head and sampling included) on `a100-80gb`, model preset
// llama-2-7b, or for Llama-2-70B preset llama-3.1-70b with vocab 32000 and max_context 4096
// (Llama-2-70B's layers are the same), at ParallelSpec{tensor_parallel}.
std::vector<TtftPoint> ttft_tensorrt_llm();
// The target of a TTFT figure: within k_whole_low-high, but Llama-2-70B's 2048-token prompt at
// TP 4 within 0.85-1.15, the bound its measurements support (docs/cost_model.md, "Fidelity": 57
// of exitsim's 428 ms are all-reduces at the busbw of Vidur's NCCL profile, and TensorRT-LLM v0.5's
// own all-reduce and GEMM speeds are not published).
inline bool is_long_tp4_prompt(const TtftFigure& f) {
  return f.tensor_parallel == 4 && f.prompt_tokens == 2048;
}
inline double ttft_low(const TtftFigure& f) {
  return is_long_tp4_prompt(f) ? 0.85 : k_whole_low;
}
inline double ttft_high(const TtftFigure& f) {
  return is_long_tp4_prompt(f) ? 1.15 : k_whole_high;
}

// The FlashAttention-3 paper (Shah et al., arXiv 2407.08608), figure "Attention forward speed,
// head dim 128 (H100 80GB SXM5)", causal panel: 16 heads of 128, batch x seq = 16k tokens.
inline constexpr const char* k_flash_attention_source =
    "FlashAttention-3 paper, arXiv 2407.08608, causal forward, head dim 128, H100 SXM5";
struct FlashAttentionFigure {
  const char* kernel;  // "FA3", "FA2"
  std::int64_t seq;
  double tflops;
};
inline constexpr std::array<FlashAttentionFigure, 4> k_flash_attention_h100 = {{
    {"FA3", 512, 292.0},
    {"FA3", 16384, 616.0},
    {"FA2", 512, 191.0},
    {"FA2", 16384, 335.0},
}};
struct FlashAttentionPoint {
  FlashAttentionFigure figure{};
  // The benchmark's time: its FLOPs as the paper counts them (4 x batch x seq^2 x heads x
  // head_dim / 2, causal) at the published rate.
  double real_us = 0;
  double exitsim_us = 0;      // attention_prefill's kernel time
  double exitsim_tflops = 0;  // exitsim's FLOPs (as it counts causal pairs) / its kernel time

  double ratio() const { return exitsim_us / real_us; }
};
// exitsim's attention_prefill on `h100-sxm` for 16384 / seq sequences of seq tokens each (a
// 2048-wide model of 16 heads and 16 K/V heads of 128, TP 1).
std::vector<FlashAttentionPoint> flash_attention_h100();

}  // namespace exitsim::analysis::gpu_fidelity
