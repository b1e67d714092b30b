// Schema rows: scenario identity, the model and the hardware.
#include <cmath>

#include "exitsim/core/presets.hpp"
#include "schema_build.hpp"

namespace exitsim::scenario::detail {
namespace {

constexpr double k_tera = 1e12;
constexpr double k_giga = 1e9;
constexpr double k_gib = 1024.0 * 1024.0 * 1024.0;

std::vector<std::string> dtype_names() {
  std::vector<std::string> names;
  for (DType t : k_all_dtypes)
    names.emplace_back(to_string(t));
  return names;
}

// "" in the Scenario is "no preset", which the file spells null.
template <typename Config>
Binding preset_binding(Config Scenario::*section) {
  return Binding{
      [section](Scenario& s, const Resolved& r) {
        const auto* name = std::get_if<std::string>(&r.value);
        (s.*section).preset = name ? *name : std::string{};
      },
      [section](const Scenario& s) {
        const std::string& name = (s.*section).preset;
        return loaded(name.empty() ? Value{} : Value{name});
      },
  };
}

Binding shape_field(auto member) {
  return field(&Scenario::model, &ModelConfig::shape, member);
}

Binding depth_field(auto member) {
  return field(&Scenario::model, &ModelConfig::shape, &ModelShape::depth, member);
}

Binding peak_tflops(DType t) {
  return Binding{
      [t](Scenario& s, const Resolved& r) {
        s.hardware.spec.set_peak_flops(t, std::get<double>(r.value) * k_tera);
      },
      [t](const Scenario& s) { return loaded(unscale(s.hardware.spec.peak_flops_for(t), k_tera)); },
  };
}

}  // namespace

std::vector<KeyDef> general_keys() {
  return {
      Key("name", Type::string, "Scenario name, copied into every output.")
          .def(std::string("default"))
          .bind(field(&Scenario::name)),
      Key("seed", Type::integer,
          "Seed of every random draw (arrivals, lengths, exits); equal seeds give identical runs.")
          .def(std::int64_t{42})
          .range(0, std::nullopt)
          .bind(field(&Scenario::seed)),
  };
}

std::vector<KeyDef> model_keys() {
  const std::string p = "model.preset";
  return {
      Key("model", Type::section,
          "The model: a preset, an explicit shape, or a preset with some fields overridden."),
      Key(p, Type::enumeration,
          "Built-in model shape. Explicit shape keys below override its values. Without a preset "
          "(null, or shape keys given and no preset) every shape key is required.")
          .allowed(model_preset_names())
          .preset("llama-3-8b")
          .bind(preset_binding(&Scenario::model)),
      Key("model.hf_config", Type::string,
          "Path of a Hugging Face config.json (model_type llama, qwen2, qwen3, qwen3_moe, "
          "mistral, mixtral, gemma, gemma2, gemma3, gemma3_text, deepseek_v2, deepseek_v3, "
          "llama4, llama4_text or gpt2) to read the shape from instead of a preset: dimensions, "
          "layers, context window, tied embeddings, dtype (torch_dtype), experts (shared ones "
          "and dense layers among them too), DeepSeek's latent attention, the sliding windows "
          "of Mistral and Gemma 2 and 3 and Llama 4's chunked attention (priced over the keys "
          "each layer sees; K/V memory holds every layer's whole context), extra norms, "
          "GPT-2's biases and learned positions (docs/scenario.md, \"Hugging Face configs\"). "
          "Explicit shape keys below override its values. Not read, so not priced: Qwen2's Q/K/V "
          "biases, logit soft-capping, RoPE scaling; quantized checkpoints are refused. It "
          "replaces model.preset's shape when both are given.")
          .input_path()
          .def(Value{})
          .shape_source()
          .bind(Binding{[](Scenario& s, const Resolved& r) {
                          const auto* path = std::get_if<std::string>(&r.value);
                          s.model.hf_config = path ? *path : std::string{};
                        },
                        [](const Scenario& s) {
                          const std::string& path = s.model.hf_config;
                          return loaded(path.empty() ? Value{} : Value{path});
                        }}),
      Key("model.name", Type::string, "Model name shown in outputs.")
          .from_preset_or(p, std::string("custom"))
          .bind(shape_field(&ModelShape::name)),
      Key("model.d_model", Type::integer, "Hidden size.")
          .range(1, 1 << 20)
          .from_preset(p)
          .shape()
          .bind(shape_field(&ModelShape::d_model)),
      Key("model.n_heads", Type::integer, "Query heads per layer.")
          .range(1, 4096)
          .from_preset(p)
          .shape()
          .bind(shape_field(&ModelShape::n_heads)),
      Key("model.n_kv_heads", Type::integer,
          "Key/value heads per layer (grouped-query attention); must divide n_heads.")
          .range(1, 4096)
          .from_preset(p)
          .shape()
          .bind(shape_field(&ModelShape::n_kv_heads)),
      Key("model.head_dim", Type::integer, "Dimension of one attention head.")
          .range(1, 4096)
          .from_preset(p)
          .shape()
          .bind(shape_field(&ModelShape::head_dim)),
      Key("model.ffn_dim", Type::integer, "Intermediate size of the MLP.")
          .range(1, 1 << 22)
          .from_preset(p)
          .shape()
          .bind(shape_field(&ModelShape::ffn_dim)),
      Key("model.vocab", Type::integer, "Vocabulary size (LM head and embedding rows).")
          .range(1, 1 << 24)
          .from_preset(p)
          .shape()
          .bind(shape_field(&ModelShape::vocab)),
      Key("model.dtype", Type::enumeration, "Element type of weights, activations and KV cache.")
          .allowed(dtype_names())
          .from_preset_or(p, std::string("bf16"))
          .bind(shape_field(&ModelShape::dtype)),
      Key("model.mlp", Type::enumeration,
          "MLP kind: gated (SwiGLU/GeGLU, 3 matrices) or plain (2 matrices).")
          .allowed({"gated", "plain"})
          .from_preset_or(p, std::string("gated"))
          .bind(shape_field(&ModelShape::mlp)),
      Key("model.tied_embeddings", Type::boolean, "Whether the LM head shares the embedding.")
          .from_preset_or(p, false)
          .bind(shape_field(&ModelShape::tied_embeddings)),
      Key("model.max_context", Type::integer,
          "Context window: the longest prompt + output the model serves (its "
          "max_position_embeddings); 0 = unlimited. Longer requests are unservable "
          "(scheduler.unservable).")
          .range(0, 1e9)
          .from_preset_or(p, std::int64_t{0})
          .bind(shape_field(&ModelShape::max_context)),
      Key("model.experts", Type::integer,
          "Mixture of experts: MLPs per layer, each of ffn_dim, with a router (d_model x experts) "
          "choosing experts_per_token of them per token (Mixtral: 8). 0 = a dense MLP. All experts "
          "are in memory; a batch reads the expected number of distinct experts its tokens are "
          "routed to (uniform routing; docs/cost_model.md).")
          .range(0, 65536)
          .from_preset_or(p, std::int64_t{0})
          .bind(shape_field(&ModelShape::experts)),
      Key("model.experts_per_token", Type::integer,
          "Experts each token is routed to (top-k; Mixtral: 2): in [1, experts], 0 for a dense "
          "model.")
          .range(0, 65536)
          .from_preset_or(p, std::int64_t{0})
          .bind(shape_field(&ModelShape::experts_per_token)),
      Key("model.depth", Type::section,
          "Depth structure: prelude layers, a shared block applied `recursions` times, coda "
          "layers. A plain L-layer model is prelude = L, recursions = 0."),
      Key("model.depth.prelude", Type::integer, "Unique layers before the shared block.")
          .range(0, 100000)
          .from_preset(p)
          .bind(depth_field(&DepthStructure::prelude_layers)),
      Key("model.depth.block", Type::integer,
          "Layers in the shared block (K); > 0 exactly when recursions > 0.")
          .range(0, 100000)
          .from_preset_or(p, std::int64_t{0})
          .bind(depth_field(&DepthStructure::block_layers)),
      Key("model.depth.recursions", Type::integer, "Times the shared block is applied (N_r).")
          .range(0, 1000)
          .from_preset_or(p, std::int64_t{0})
          .bind(depth_field(&DepthStructure::recursions)),
      Key("model.depth.lora_rank", Type::integer_list,
          "Per-recursion LoRA rank (relaxed recursion): empty, or one entry per recursion "
          "(0 = none).")
          .range(0, 65536)
          .from_preset_or(p, std::vector<std::int64_t>{})
          .bind(depth_field(&DepthStructure::lora_rank)),
      Key("model.depth.coda", Type::integer, "Unique layers after the stack, run by every exit.")
          .range(0, 100000)
          .from_preset_or(p, std::int64_t{0})
          .bind(depth_field(&DepthStructure::coda_layers)),
      Key("model.depth.exit_points", Type::integer_list,
          "Depths (layers of prelude + unrolled block) where a token may exit; ascending, in "
          "[1, stacked depth]. Empty = ends of recursions, or the full depth of a plain model.")
          .range(1, std::nullopt)
          .from_preset_or(p, std::vector<std::int64_t>{})
          .bind(depth_field(&DepthStructure::exit_points)),
  };
}

std::vector<KeyDef> hardware_keys() {
  const std::string p = "hardware.preset";
  std::vector<KeyDef> rows = {
      Key("hardware", Type::section, "The accelerator each replica runs on (one per replica)."),
      Key(p, Type::enumeration,
          "Built-in accelerator (spec-sheet numbers). Explicit keys below override it; without a "
          "preset, peak_tflops, memory_bandwidth_gbps and memory_gib are required.")
          .allowed(hardware_preset_names())
          .preset("h100-sxm")
          .bind(preset_binding(&Scenario::hardware)),
      Key("hardware.name", Type::string, "Accelerator name shown in outputs.")
          .from_preset_or(p, std::string("custom"))
          .bind(field(&Scenario::hardware, &HardwareConfig::spec, &HardwareSpec::name)),
      Key("hardware.peak_tflops", Type::section,
          "Dense peak TFLOP/s (TOP/s for int8) per dtype; 0 = unsupported.")
          .shape(),
  };
  for (DType t : k_all_dtypes) {
    const std::string name(to_string(t));
    rows.push_back(Key("hardware.peak_tflops." + name, Type::number, "Peak for " + name + ".")
                       .range(0, std::nullopt)
                       .from_preset_or(p, 0.0)
                       .shape()
                       .bind(peak_tflops(t)));
  }
  const std::vector<KeyDef> rest = {
      Key("hardware.memory_bandwidth_gbps", Type::number, "Memory bandwidth in GB/s (1e9 B/s).")
          .range(0, std::nullopt)
          .open_min()
          .from_preset(p)
          .shape()
          .bind(scaled_field(k_giga, &Scenario::hardware, &HardwareConfig::spec,
                             &HardwareSpec::memory_bandwidth)),
      Key("hardware.memory_gib", Type::number, "Device memory in GiB (2^30 B).")
          // A mebi-GiB (a PiB) is far past any device and keeps the bytes, and every K/V block
          // count sized from them, well inside int64.
          .range(0, 1 << 20)
          .open_min()
          .from_preset(p)
          .shape()
          .bind(Binding{[](Scenario& s, const Resolved& r) {
                          s.hardware.spec.memory_bytes = static_cast<std::int64_t>(
                              std::llround(std::get<double>(r.value) * k_gib));
                        },
                        [](const Scenario& s) {
                          return loaded(static_cast<double>(s.hardware.spec.memory_bytes) / k_gib);
                        }}),
      Key("hardware.launch_overhead_us", Type::number,
          "Host-side cost of one kernel launch, in microseconds.")
          .range(0, 1e6)
          .from_preset_or(p, 4.0)
          .bind(Binding{[](Scenario& s, const Resolved& r) {
                          s.hardware.spec.launch_overhead =
                              from_microseconds(std::get<double>(r.value));
                        },
                        [](const Scenario& s) {
                          return loaded(to_microseconds(s.hardware.spec.launch_overhead));
                        }}),
      Key("hardware.link_bandwidth_gbps", Type::number,
          "Bandwidth of the link to the node's other GPUs, per direction, in GB/s (NVLink 4: 450 "
          "of its 900 GB/s total; PCIe Gen4 x16: 32); what tensor parallelism's collectives "
          "move over. 0 = none (a single-GPU card).")
          .range(0, std::nullopt)
          .from_preset_or(p, 0.0)
          .bind(scaled_field(k_giga, &Scenario::hardware, &HardwareConfig::spec,
                             &HardwareSpec::interconnect, &Interconnect::link_bandwidth)),
      Key("hardware.link_latency_us", Type::number,
          "Fixed time of one collective over that link (NCCL's latency: synchronisation and "
          "hops, whatever the group's size), in microseconds; its bytes take "
          "hardware.link_efficiency's share of the bandwidth besides.")
          .range(0, 1e6)
          .from_preset_or(p, 0.0)
          .bind(Binding{[](Scenario& s, const Resolved& r) {
                          s.hardware.spec.interconnect.link_latency =
                              from_microseconds(std::get<double>(r.value));
                        },
                        [](const Scenario& s) {
                          return loaded(to_microseconds(s.hardware.spec.interconnect.link_latency));
                        }}),
      Key("hardware.link_efficiency", Type::number,
          "Share of the link's bandwidth a collective's bus bandwidth reaches (NCCL's busbw); 0 = "
          "cost_model.bandwidth_efficiency.")
          .range(0, 1)
          .from_preset_or(p, 0.0)
          .bind(field(&Scenario::hardware, &HardwareConfig::spec, &HardwareSpec::interconnect,
                      &Interconnect::link_efficiency)),
      Key("hardware.send_latency_us", Type::number,
          "Fixed time of one point-to-point send to another GPU of the node (a pipeline "
          "stage's hand-off), in microseconds.")
          .range(0, 1e6)
          .from_preset_or(p, 0.0)
          .bind(Binding{[](Scenario& s, const Resolved& r) {
                          s.hardware.spec.interconnect.send_latency =
                              from_microseconds(std::get<double>(r.value));
                        },
                        [](const Scenario& s) {
                          return loaded(to_microseconds(s.hardware.spec.interconnect.send_latency));
                        }}),
      Key("hardware.send_efficiency", Type::number,
          "Share of the link's bandwidth a point-to-point send within the node reaches; 0 = "
          "hardware.link_efficiency.")
          .range(0, 1)
          .from_preset_or(p, 0.0)
          .bind(field(&Scenario::hardware, &HardwareConfig::spec, &HardwareSpec::interconnect,
                      &Interconnect::send_efficiency)),
      Key("hardware.node_link_bandwidth_gbps", Type::number,
          "Bandwidth from each GPU to other nodes, per direction, in GB/s (its own network "
          "adapter: InfiniBand NDR 400 Gb/s = 50); what a pipeline stage hands its activations "
          "over when the next stage is on another node. 0 = none (one node).")
          .range(0, std::nullopt)
          .from_preset_or(p, 0.0)
          .bind(scaled_field(k_giga, &Scenario::hardware, &HardwareConfig::spec,
                             &HardwareSpec::interconnect, &Interconnect::node_link_bandwidth)),
      Key("hardware.node_link_latency_us", Type::number,
          "Latency of one send between nodes over that network, in microseconds.")
          .range(0, 1e6)
          .from_preset_or(p, 0.0)
          .bind(Binding{[](Scenario& s, const Resolved& r) {
                          s.hardware.spec.interconnect.node_link_latency =
                              from_microseconds(std::get<double>(r.value));
                        },
                        [](const Scenario& s) {
                          return loaded(
                              to_microseconds(s.hardware.spec.interconnect.node_link_latency));
                        }}),
      Key("hardware.node_link_efficiency", Type::number,
          "Share of the network's bandwidth a send between nodes reaches; 0 = "
          "cost_model.bandwidth_efficiency.")
          .range(0, 1)
          .from_preset_or(p, 0.0)
          .bind(field(&Scenario::hardware, &HardwareConfig::spec, &HardwareSpec::interconnect,
                      &Interconnect::node_link_efficiency)),
      Key("hardware.min_kernel_us", Type::number,
          "GPU time every kernel takes beside its FLOPs or bytes (start-up, tail, the last "
          "partial wave), in microseconds: no kernel is shorter. Not launch_overhead_us, the "
          "host's cost that CUDA graphs remove.")
          .range(0, 1e6)
          .from_preset_or(p, 0.0)
          .bind(scaled_field(1e3, &Scenario::hardware, &HardwareConfig::spec,
                             &HardwareSpec::kernels, &KernelCorrections::min_kernel_ns)),
      Key("hardware.ridge_exponent", Type::number,
          "How a kernel's compute and memory times combine near the roofline's ridge: "
          "(compute^k + memory^k)^(1/k); 0 = the larger alone.")
          .range(0, 64)
          .from_preset_or(p, 0.0)
          .bind(field(&Scenario::hardware, &HardwareConfig::spec, &HardwareSpec::kernels,
                      &KernelCorrections::ridge_exponent)),
      Key("hardware.elementwise_efficiency", Type::number,
          "Share of peak bandwidth element-wise kernels (norms, activations, softmax) reach; 0 = "
          "cost_model.bandwidth_efficiency.")
          .range(0, 1)
          .from_preset_or(p, 0.0)
          .bind(field(&Scenario::hardware, &HardwareConfig::spec, &HardwareSpec::kernels,
                      &KernelCorrections::elementwise_efficiency)),
      Key("hardware.decode_attention_floor_us", Type::number,
          "A decode attention kernel's time beside its K/V bytes, in place of min_kernel_us, in "
          "microseconds; 0 = min_kernel_us.")
          .range(0, 1e6)
          .from_preset_or(p, 0.0)
          .bind(scaled_field(1e3, &Scenario::hardware, &HardwareConfig::spec,
                             &HardwareSpec::kernels,
                             &KernelCorrections::decode_attention_floor_ns)),
      Key("hardware.decode_attention_us_per_sequence_head", Type::number,
          "Decode attention's time per sequence and K/V head of a GPU's shard, beside its K/V "
          "bytes, in microseconds.")
          .range(0, 1e6)
          .from_preset_or(p, 0.0)
          .bind(scaled_field(1e3, &Scenario::hardware, &HardwareConfig::spec,
                             &HardwareSpec::kernels,
                             &KernelCorrections::decode_attention_ns_per_sequence_head)),
      Key("hardware.prefill_attention_efficiency", Type::number,
          "Share of peak FLOP/s prefill attention reaches (FlashAttention-2-class on A100, "
          "-3-class on H100); 0 = cost_model.flops_efficiency.")
          .range(0, 1)
          .from_preset_or(p, 0.0)
          .bind(field(&Scenario::hardware, &HardwareConfig::spec, &HardwareSpec::kernels,
                      &KernelCorrections::prefill_attention_efficiency)),
      Key("hardware.host_link_bandwidth_gbps", Type::number,
          "Bandwidth of the GPU's link to its host, per direction, in GB/s (PCIe Gen5 x16: 64; "
          "Gen4: 32); what swapped K/V moves over (scheduler.preemption: swap).")
          .range(0, std::nullopt)
          .from_preset_or(p, 0.0)
          .bind(scaled_field(k_giga, &Scenario::hardware, &HardwareConfig::spec,
                             &HardwareSpec::host_link_bandwidth)),
      Key("hardware.host_swap_gb", Type::number,
          "Host memory set aside per GPU for swapped-out K/V, in GiB (vLLM's --swap-space, 4 by "
          "default); a victim that does not fit is recomputed instead, and the run says how "
          "often.")
          .range(0, 1e6)
          .from_preset_or(p, 4.0)
          .bind(Binding{[](Scenario& s, const Resolved& r) {
                          s.hardware.spec.host_swap_bytes = static_cast<std::int64_t>(
                              std::llround(std::get<double>(r.value) * 1073741824.0));
                        },
                        [](const Scenario& s) {
                          return loaded(static_cast<double>(s.hardware.spec.host_swap_bytes) /
                                        1073741824.0);
                        }}),
      Key("hardware.gpus_per_node", Type::integer,
          "GPUs one node joins by that link: the most a tensor-parallel replica may span.")
          .range(1, 64)
          .from_preset_or(p, std::int64_t{1})
          .bind(field(&Scenario::hardware, &HardwareConfig::spec, &HardwareSpec::interconnect,
                      &Interconnect::gpus_per_node)),
      Key("cost_model", Type::section, "How the simulator prices each operation."),
      Key("cost_model.kind", Type::enumeration,
          "roofline: from hardware and model shape; calibrated: per-op models fitted from op "
          "traces; table: measured per-op times looked up by batch shape.")
          .allowed({"roofline", "calibrated", "table"})
          .def(std::string("roofline"))
          .bind(field(&Scenario::cost_model, &CostModelConfig::kind)),
      Key("cost_model.profile", Type::string, "Path of the cost profile.")
          .input_path()
          .required()
          .when("cost_model.kind", {"calibrated", "table"})
          .bind(field(&Scenario::cost_model, &CostModelConfig::profile)),
      Key("cost_model.step_variability", Type::boolean,
          "calibrated: each iteration's price times a factor drawn from the profile's measured "
          "spread of the engine's steps around their price (seeded; its median is about 1, its "
          "mean the engine's); false: every iteration at its price. Without a measured spread in "
          "the profile, prices are used as they are, and the run says so. Off by default: on "
          "this project's CPU validation it fixed full depth's TPOT but overpredicted the "
          "dynamic strategies' (docs/calibration.md).")
          .def(false)
          .when("cost_model.kind", {"calibrated"})
          .bind(field(&Scenario::cost_model, &CostModelConfig::step_variability)),
      Key("cost_model.price_scale", Type::number,
          "Every iteration's price times this factor, whatever the cost model: a what-if for a "
          "machine that much slower (above 1) or faster. Runs priced at another scale than 1 "
          "say so in their notes. `exitsim validate` uses it to show how far each metric moves "
          "for prices off by the profile's measured error.")
          .range(0.01, 100)
          .def(1.0)
          .bind(field(&Scenario::cost_model, &CostModelConfig::price_scale)),
      Key("cost_model.timing_scope", Type::enumeration,
          "What each iteration's price covers. whole_step: every op the step runs. block_only: "
          "the layers of the recursion block alone (all layers of a plain model), with no "
          "embedding, first (prelude) or last (coda) layers, LM head, sampling or exit probes: "
          "what Mixture-of-Recursions' throughput timed (docs/papers.md). Times, throughput and "
          "latencies are then block times, not step times, and the run says so in its "
          "warnings. A calibrated profile's fits price whole engine steps, so it has no scope; "
          "block_only also refuses pipeline parallelism.")
          .allowed({"whole_step", "block_only"})
          .def(std::string("whole_step"))
          .when("cost_model.kind", {"roofline", "table"})
          .bind(field(&Scenario::cost_model, &CostModelConfig::timing_scope)),
      Key("cost_model.flops_efficiency", Type::number,
          "Fraction of peak FLOP/s that matrix operations reach.")
          .range(0, 1)
          .open_min()
          .def(0.7)
          .when("cost_model.kind", {"roofline"})
          .bind(field(&Scenario::cost_model, &CostModelConfig::flops_efficiency)),
      Key("cost_model.bandwidth_efficiency", Type::number,
          "Fraction of peak memory bandwidth that memory-bound operations reach.")
          .range(0, 1)
          .open_min()
          .def(0.85)
          .when("cost_model.kind", {"roofline"})
          .bind(field(&Scenario::cost_model, &CostModelConfig::bandwidth_efficiency)),
  };
  rows.insert(rows.end(), rest.begin(), rest.end());
  return rows;
}

}  // namespace exitsim::scenario::detail
