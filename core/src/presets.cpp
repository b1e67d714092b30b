#include "exitsim/core/presets.hpp"

#include <functional>
#include <string>
#include <utility>

namespace exitsim {
namespace {

struct ShapeArgs {
  std::int64_t d_model, n_heads, n_kv_heads, head_dim, ffn_dim, vocab;
  int layers;
  std::int64_t max_context;  // max_position_embeddings
  MlpKind mlp;
  bool tied;
};

ModelShape make_model(std::string name, const ShapeArgs& a) {
  ModelShape m;
  m.name = std::move(name);
  m.d_model = a.d_model;
  m.n_heads = a.n_heads;
  m.n_kv_heads = a.n_kv_heads;
  m.head_dim = a.head_dim;
  m.ffn_dim = a.ffn_dim;
  m.vocab = a.vocab;
  m.dtype = DType::bf16;
  m.mlp = a.mlp;
  m.tied_embeddings = a.tied;
  m.max_context = a.max_context;
  m.depth = DepthStructure::plain(a.layers);
  return m;
}

// `base` as a mixture of `experts` MLPs of its ffn_dim, `top_k` of them per token.
ModelShape with_experts(ModelShape base, std::int64_t experts, std::int64_t top_k) {
  base.experts = experts;
  base.experts_per_token = top_k;
  return base;
}

// `base` with another name and depth structure (a recursive or early-exit variant of it).
ModelShape with_depth(ModelShape base, std::string name, DepthStructure depth) {
  base.name = std::move(name);
  base.depth = std::move(depth);
  return base;
}

// Mixture-of-Recursions on a SmolLM shape with Middle-Cycle sharing. Middle-Cycle needs
// (layers - 2) divisible by N_r. Where the base model's count does not divide, the MoR paper
// changes the layer count (SmolLM-360M, 32 layers, N_r = 4 is trained with 34 layers, a
// shared block of 8), and so do we: the nearest count that divides, the larger one on a tie (as
// for 360M, where 30 and 34 are equally near). So 135M (30 layers) with N_r = 3 has 29 layers
// (block of 9); 1.7B (24 layers) has 23 with N_r = 3 (block of 7) and 26 with N_r = 4 (block of
// 6, a tie with 22). The other combinations keep the base count.
int mor_layer_count(int layers, int recursions) {
  for (int step = 0;; ++step) {
    if ((layers + step - 2) % recursions == 0)
      return layers + step;
    if ((layers - step - 2) % recursions == 0)
      return layers - step;
  }
}

ModelShape mor(const ModelShape& base, std::string_view size, int recursions) {
  const int layers = mor_layer_count(base.depth.prelude_layers, recursions);
  return with_depth(base, "mor-smollm-" + std::string(size) + "-r" + std::to_string(recursions),
                    DepthStructure::middle_cycle(layers, recursions));
}

// Shapes are the published config.json values of each model on the Hugging Face Hub.
const std::vector<ModelShape>& model_presets() {
  static const std::vector<ModelShape> presets = {
      // meta-llama/Meta-Llama-3-8B: 32 layers, GQA 32/8, SwiGLU 14336, 128256 vocab.
      make_model("llama-3-8b", {4096, 32, 8, 128, 14336, 128256, 32, 8192, MlpKind::gated, false}),
      // meta-llama/Llama-2-7b-hf: 32 layers, MHA 32 heads, SwiGLU 11008, 32000 vocab.
      make_model("llama-2-7b", {4096, 32, 32, 128, 11008, 32000, 32, 4096, MlpKind::gated, false}),
      // HuggingFaceTB/SmolLM-135M: 30 layers, GQA 9/3, SwiGLU 1536, 49152 vocab, tied.
      make_model("smollm-135m", {576, 9, 3, 64, 1536, 49152, 30, 2048, MlpKind::gated, true}),
      // HuggingFaceTB/SmolLM-360M: 32 layers, GQA 15/5, SwiGLU 2560, tied.
      make_model("smollm-360m", {960, 15, 5, 64, 2560, 49152, 32, 2048, MlpKind::gated, true}),
      // HuggingFaceTB/SmolLM-1.7B: 24 layers, MHA 32 heads, SwiGLU 8192, tied.
      make_model("smollm-1.7b", {2048, 32, 32, 64, 8192, 49152, 24, 2048, MlpKind::gated, true}),
      // google/gemma-2b: 18 layers, MQA 8/1 with head_dim 256, GeGLU 16384, 256000 vocab, tied.
      make_model("gemma-2b", {2048, 8, 1, 256, 16384, 256000, 18, 8192, MlpKind::gated, true}),
      // TinyLlama/TinyLlama-1.1B: 22 layers, GQA 32/4, SwiGLU 5632, 32000 vocab.
      make_model("tinyllama-1.1b", {2048, 32, 4, 64, 5632, 32000, 22, 2048, MlpKind::gated, false}),
      // EleutherAI/pythia-1b: 16 layers, 8 heads of 256, GELU MLP 8192, 50304 vocab, untied.
      make_model("pythia-1b", {2048, 8, 8, 256, 8192, 50304, 16, 2048, MlpKind::plain, false}),
      // The models people serve. Context windows are config.json's max_position_embeddings.
      // meta-llama/Llama-3.1-8B: Llama-3-8B's shape with llama3 RoPE scaling to 131072.
      make_model("llama-3.1-8b",
                 {4096, 32, 8, 128, 14336, 128256, 32, 131072, MlpKind::gated, false}),
      // meta-llama/Llama-3.1-70B: 80 layers, GQA 64/8, SwiGLU 28672, 128256 vocab.
      make_model("llama-3.1-70b",
                 {8192, 64, 8, 128, 28672, 128256, 80, 131072, MlpKind::gated, false}),
      // meta-llama/Llama-3.1-405B: 126 layers, GQA 128/8, SwiGLU 53248, 128256 vocab. (The
      // first config.json of the release said 16 K/V heads; the current one and the Llama 3
      // paper, Table 3, say 8.)
      make_model("llama-3.1-405b",
                 {16384, 128, 8, 128, 53248, 128256, 126, 131072, MlpKind::gated, false}),
      // Qwen/Qwen2.5-7B-Instruct: 28 layers, GQA 28/4, SwiGLU 18944, 152064 vocab, untied. Its
      // config.json says 32768 positions (YaRN to 131072 is opt-in; the base model's config
      // says 131072). The biases of Q, K and V (28 x 4608 = 129,024 weights, 0.002%) are not
      // counted: ModelShape has no biases, and reading them is negligible.
      make_model("qwen2.5-7b", {3584, 28, 4, 128, 18944, 152064, 28, 32768, MlpKind::gated, false}),
      // Qwen/Qwen2.5-72B-Instruct: 80 layers, GQA 64/8, SwiGLU 29568, 152064 vocab, untied,
      // 32768 positions; Q/K/V biases (80 x 10240 = 819,200 weights) not counted either.
      make_model("qwen2.5-72b",
                 {8192, 64, 8, 128, 29568, 152064, 80, 32768, MlpKind::gated, false}),
      // mistralai/Mistral-7B-v0.3: 32 layers, GQA 32/8, SwiGLU 14336, 32768 vocab, no sliding
      // window (v0.1's was 4096).
      make_model("mistral-7b", {4096, 32, 8, 128, 14336, 32768, 32, 32768, MlpKind::gated, false}),
      // mistralai/Mixtral-8x7B-v0.1: Mistral-7B's attention, 8 SwiGLU experts of 14336, top-2,
      // 32000 vocab.
      with_experts(make_model("mixtral-8x7b",
                              {4096, 32, 8, 128, 14336, 32000, 32, 32768, MlpKind::gated, false}),
                   8, 2),
      // mistralai/Mixtral-8x22B-Instruct-v0.1: 56 layers, GQA 48/8, 8 SwiGLU experts of 16384,
      // top-2, 32768 vocab, 65536 positions.
      with_experts(make_model("mixtral-8x22b",
                              {6144, 48, 8, 128, 16384, 32768, 56, 65536, MlpKind::gated, false}),
                   8, 2),
  };
  static const std::vector<ModelShape> all = [] {
    std::vector<ModelShape> out = presets;
    const auto base = [](std::string_view name) {
      for (const ModelShape& m : presets) {
        if (m.name == name)
          return m;
      }
      return ModelShape{};  // unreachable: every name below is a preset above
    };
    for (const auto& [size, name] :
         {std::pair{"135m", "smollm-135m"}, std::pair{"360m", "smollm-360m"},
          std::pair{"1.7b", "smollm-1.7b"}}) {
      for (int recursions = 2; recursions <= 4; ++recursions)
        out.push_back(mor(base(name), size, recursions));
    }
    // Relaxed Recursive Transformers' recursive Gemma 1B: Gemma-2B's 18 layers become one block
    // of 9 looped twice (CYCLE sharing, no unique layers); 0.99B non-embedding parameters.
    DepthStructure rrt;
    rrt.block_layers = 9;
    rrt.recursions = 2;
    out.push_back(with_depth(base("gemma-2b"), "rrt-gemma-1b", rrt));
    // The relaxed variant with a rank-64 LoRA per loop (1.07B non-embedding in the paper).
    rrt.lora_rank = {64, 64};
    out.push_back(with_depth(base("gemma-2b"), "rrt-gemma-1b-lora64", rrt));
    // LayerSkip's Llama-2-7B: the plain model with an exit after every 8 layers.
    DepthStructure layerskip = DepthStructure::plain(32);
    layerskip.exit_points = {8, 16, 24, 32};
    out.push_back(with_depth(base("llama-2-7b"), "layerskip-llama-2-7b", layerskip));
    return out;
  }();
  return all;
}

constexpr double k_tera = 1e12;
constexpr double k_giga = 1e9;
constexpr std::int64_t k_gib = std::int64_t{1} << 30;

// The link to the other GPUs of a node: per-direction bandwidth (the datasheets' bidirectional
// figure halved), the fixed time of one collective over it, and the share of the bandwidth a
// collective reaches.
struct Link {
  double gb_s_per_direction;
  double collective_latency_us;
  double collective_efficiency;  // 0: the cost model's bandwidth efficiency
  double send_latency_us;        // one point-to-point send within the node
  double send_efficiency;        // 0: collective_efficiency
  int gpus_per_node;
  // Each GPU's network adapter to other nodes (HGX boards pair every GPU with one), per
  // direction, one send's latency and the share of the bandwidth a send reaches.
  double node_gb_s_per_direction;
  double node_latency_us;
  double node_efficiency;
  // PCIe to the host: Gen5 x16 on H100/H200 SXM (64 GB/s each way), Gen4 x16 on A100 and L40S
  // (32).
  double host_gb_s_per_direction;
};

// InfiniBand NDR (ConnectX-7), 400 Gb/s per GPU on HGX H100/H200; HDR (ConnectX-6), 200 Gb/s
// per GPU on HGX A100.
constexpr double k_ndr_gb_s = 50.0;
constexpr double k_hdr_gb_s = 25.0;

// Fitted by `exitsim calibrate --fit-hardware` (analysis::fit_kernel_corrections,
// docs/calibration.md) to Vidur's public NCCL profiles (microsoft/vidur @7d47513,
// data/profiling/network/{a100,h100}_dgx/{all_reduce,send_recv}.csv: kernel time by size, 2-8 GPUs
// in one DGX node and 2 GPUs over 2 nodes, without CUDA graphs) as time = latency + bytes /
// (bandwidth x efficiency): all-reduce bus bytes 2(p-1)/p N; a send's bytes N.
// A100 (HGX, NVLink 3, HDR): all-reduce 42 us + busbw 0.53 x 300 GB/s; send 13 us + 0.93 x
// 300 GB/s within the node; 31 us + 0.31 x 25 GB/s between nodes.
constexpr Link k_a100_link = {300, 42, 0.53, 13, 0.93, 8, k_hdr_gb_s, 31, 0.31, 32};
// H100 (HGX, NVLink 4, NDR): all-reduce 29 us + busbw 0.78 x 450 GB/s; send 7.7 us + 0.79 x
// 450 GB/s; 20 us + 0.72 x 50 GB/s between nodes. H200 has the same NVLink and network: the
// H100's figures.
constexpr Link k_h100_link = {450, 29, 0.78, 7.7, 0.79, 8, k_ndr_gb_s, 20, 0.72, 64};
// L40S: no NVLink, PCIe Gen4 x16 at 64 GB/s (32 each way), 8 per server in the OEM reference
// designs, whose network is not fixed: one 200 Gb/s adapter per GPU assumed (set
// hardware.node_link_bandwidth_gbps to yours). Not measured: a collective through the host
// bridge taken as 2 us per ring step of 8 GPUs (28 us), a send as 5 us.
constexpr Link k_l40s_link = {32, 28, 0, 5, 0, 8, k_hdr_gb_s, 5, 0, 32};

// Kernel corrections (KernelCorrections), fitted by `exitsim calibrate --fit-hardware` to Vidur's
// per-op kernel times (microsoft/vidur @7d47513, data/profiling/compute/{a100,h100}/*/mlp.csv:
// Llama-2-7B/70B, CodeLlama-34B and, on A100, Llama-3-8B/70B at TP 1-8 and 1-4096+ tokens; and
// the A100 attention grid of Llama-2-70B's TP-2 shard @e2d00e9) at the default efficiencies
// (FLOPs 0.7, bandwidth 0.85), rounded; prefill attention from the FlashAttention papers.
struct Corrections {
  double min_kernel_us;
  double ridge_exponent;
  double elementwise_efficiency;
  double decode_floor_us;
  double decode_us_per_sequence_head;
  double prefill_attention_efficiency;
  const char* source;
};
// A100: norms and activations reach half the bandwidth; decode attention 16.6 us + 0.012 us per
// sequence and K/V head. Prefill attention is not Vidur's: its grid times Sarathi's paged
// flash_attn_with_kvcache (0.23 of peak fits it), far below the FlashAttention-2 kernels serving
// engines run, which reach 50-73% of the A100's peak (Dao 2023, arXiv 2307.08691): 0.5.
constexpr Corrections k_a100_kernels = {
    4.1,
    1.5,
    0.49,
    16.6,
    0.012,
    0.5,
    "fitted to Vidur's A100 profiles (microsoft/vidur@7d47513 mlp.csv, a100_dgx network; "
    "@e2d00e9 attention), prefill attention from FlashAttention-2's published A100 efficiency"};
// H100: the same fit on Vidur's H100 profiles. Vidur has no public H100 attention grid: decode
// attention carries the A100's figures; prefill attention is FlashAttention-3's causal
// head-dim-128 forward, 292-616 TF/s from 512 to 16k tokens (Shah et al. 2024, arXiv 2407.08608):
// 0.5 of the 989 TF/s peak. The H200 takes the H100's.
constexpr Corrections k_h100_kernels = {
    3.6,
    1.5,
    0.56,
    16.6,
    0.012,
    0.5,
    "fitted to Vidur's H100 profiles (microsoft/vidur@7d47513 mlp.csv, h100_dgx network), "
    "decode attention from its A100 grid, prefill attention from FlashAttention-3's published "
    "H100 throughput"};
// Not measured: the bare roofline.
constexpr Corrections k_unfitted_kernels = {0, 0, 0, 0, 0, 0, ""};

HardwareSpec make_hardware(std::string name, double fp32_tflops, double bf16_tflops,
                           double fp8_tflops, double int8_tops, double bandwidth_gb_s,
                           std::int64_t memory_bytes, const Link& link,
                           const Corrections& kernels) {
  HardwareSpec h;
  h.name = std::move(name);
  h.set_peak_flops(DType::fp32, fp32_tflops * k_tera);
  h.set_peak_flops(DType::bf16, bf16_tflops * k_tera);
  h.set_peak_flops(DType::fp16, bf16_tflops * k_tera);
  h.set_peak_flops(DType::fp8, fp8_tflops * k_tera);
  h.set_peak_flops(DType::int8, int8_tops * k_tera);
  h.memory_bandwidth = bandwidth_gb_s * k_giga;
  h.memory_bytes = memory_bytes;
  // A typical CUDA kernel launch as seen from the host, when not hidden by CUDA graphs.
  h.launch_overhead = 4 * k_ns_per_us;
  const auto ns = [](double us) {
    return static_cast<TimeNs>(us * static_cast<double>(k_ns_per_us));
  };
  h.interconnect.link_bandwidth = link.gb_s_per_direction * k_giga;
  h.interconnect.link_latency = ns(link.collective_latency_us);
  h.interconnect.link_efficiency = link.collective_efficiency;
  h.interconnect.send_latency = ns(link.send_latency_us);
  h.interconnect.send_efficiency = link.send_efficiency;
  h.interconnect.gpus_per_node = link.gpus_per_node;
  h.interconnect.node_link_bandwidth = link.node_gb_s_per_direction * k_giga;
  h.interconnect.node_link_latency = ns(link.node_latency_us);
  h.interconnect.node_link_efficiency = link.node_efficiency;
  h.host_link_bandwidth = link.host_gb_s_per_direction * k_giga;
  h.host_swap_bytes = 4 * k_gib;  // vLLM's default --swap-space
  KernelCorrections& k = h.kernels;
  k.min_kernel_ns = kernels.min_kernel_us * 1e3;
  k.ridge_exponent = kernels.ridge_exponent;
  k.elementwise_efficiency = kernels.elementwise_efficiency;
  k.decode_attention_floor_ns = kernels.decode_floor_us * 1e3;
  k.decode_attention_ns_per_sequence_head = kernels.decode_us_per_sequence_head * 1e3;
  k.prefill_attention_efficiency = kernels.prefill_attention_efficiency;
  k.source = kernels.source;
  return h;
}

// Dense tensor-core peaks for bf16/fp16, fp8 and int8 (the sheets' sparsity figures halved); fp32
// is the non-tensor FP32 peak (an fp32 matmul runs there unless TF32 is enabled, which changes
// its rounding).
const std::vector<HardwareSpec>& hardware_presets() {
  static const std::vector<HardwareSpec> presets = {
      // NVIDIA H100 SXM5 datasheet: FP32 66.9, BF16 989.4, FP8 1978.9, INT8 1978.9 TOPS;
      // 80 GB HBM3 at 3.35 TB/s; NVLink 4 at 900 GB/s (450 each way), 8 per HGX node.
      make_hardware("h100-sxm", 66.9, 989.4, 1978.9, 1978.9, 3350, 80 * k_gib, k_h100_link,
                    k_h100_kernels),
      // NVIDIA H200 SXM datasheet: same compute as H100 SXM; 141 GB HBM3e at 4.8 TB/s; NVLink 4
      // at 900 GB/s, 8 per HGX node.
      make_hardware("h200", 66.9, 989.4, 1978.9, 1978.9, 4800, std::int64_t{141'000'000'000},
                    k_h100_link, k_h100_kernels),
      // NVIDIA A100 datasheet (SXM4 40GB): FP32 19.5, BF16 312, INT8 624; HBM2 1,555 GB/s. No FP8.
      // NVLink 3 at 600 GB/s (300 each way), 8 per HGX node.
      make_hardware("a100-40gb", 19.5, 312, 0, 624, 1555, 40 * k_gib, k_a100_link, k_a100_kernels),
      // NVIDIA A100 80GB SXM4: same compute and NVLink; HBM2e 2,039 GB/s.
      make_hardware("a100-80gb", 19.5, 312, 0, 624, 2039, 80 * k_gib, k_a100_link, k_a100_kernels),
      // NVIDIA L40S datasheet: FP32 91.6, BF16 362.05, FP8 733, INT8 733 TOPS;
      // 48 GB GDDR6 at 864 GB/s; no NVLink: PCIe Gen4 x16 at 64 GB/s (32 each way), 8 per
      // server in the OEM reference designs, whose network is not fixed: one 200 Gb/s adapter
      // per GPU assumed (set hardware.node_link_bandwidth_gbps to yours).
      make_hardware("l40s", 91.6, 362.05, 733, 733, 864, 48 * k_gib, k_l40s_link,
                    k_unfitted_kernels),
  };
  return presets;
}

template <typename T>
std::optional<T> find_named(const std::vector<T>& all, std::string_view name) {
  for (const T& item : all) {
    if (item.name == name)
      return item;
  }
  return std::nullopt;
}

template <typename T>
std::vector<std::string> names_of(const std::vector<T>& all) {
  std::vector<std::string> names;
  names.reserve(all.size());
  for (const T& item : all)
    names.push_back(item.name);
  return names;
}

}  // namespace

std::optional<ModelShape> find_model_preset(std::string_view name) {
  return find_named(model_presets(), name);
}
std::vector<std::string> model_preset_names() {
  return names_of(model_presets());
}

std::optional<HardwareSpec> find_hardware_preset(std::string_view name) {
  return find_named(hardware_presets(), name);
}
std::vector<std::string> hardware_preset_names() {
  return names_of(hardware_presets());
}

}  // namespace exitsim
