#include "exitsim/core/parallel.hpp"

#include <fmt/format.h>

#include "exitsim/core/checked.hpp"
#include "exitsim/core/error.hpp"

namespace exitsim {

TensorShard TensorShard::of(const ModelShape& model, int degree, bool expert_parallel) {
  const std::int64_t p = degree;
  TensorShard shard;
  shard.degree = degree;
  shard.heads = model.n_heads / p;
  shard.kv_heads = model.n_kv_heads >= p ? model.n_kv_heads / p : 1;
  shard.cache_heads = model.latent.enabled() ? 1 : shard.kv_heads;
  shard.expert_parallel = expert_parallel && model.is_moe() && degree > 1;
  shard.ffn = shard.expert_parallel ? model.ffn_dim : model.ffn_dim / p;
  // Shared experts and dense layers are split like a dense MLP, EP or not (vLLM's).
  shard.shared_ffn = model.ffn_dim / p;
  shard.dense_ffn = model.dense_ffn_dim / p;
  shard.local_experts = shard.expert_parallel ? model.experts / p : model.experts;
  shard.vocab = (model.vocab + p - 1) / p;
  return shard;
}

std::vector<PipelineStage> split_pipeline(int layers, int stages) {
  std::vector<int> counts(static_cast<std::size_t>(stages), layers / stages);
  const int remainder = layers % stages;
  // The remainder goes to the stages before the last, nearest it first.
  for (int i = 0; i < remainder; ++i)
    ++counts[static_cast<std::size_t>(stages - 2 - i)];
  std::vector<PipelineStage> split;
  int first = 0;
  for (int s = 0; s < stages; ++s) {
    const int last = first + counts[static_cast<std::size_t>(s)];
    split.push_back({first, last, s == 0, s == stages - 1});
    first = last;
  }
  return split;
}

bool hand_off_crosses_nodes(int stage, const ParallelSpec& parallel, int gpus_per_node) {
  // Stage s holds GPUs [s x TP, (s + 1) x TP); the next stage starts a node when its first GPU
  // is a multiple of the node's size.
  const std::int64_t next_first = std::int64_t{stage + 1} * parallel.tensor;
  return gpus_per_node > 0 && next_first % gpus_per_node == 0;
}

std::int64_t TensorShard::weight_bytes(const ModelShape& model) const {
  return weight_bytes(model, {0, model.depth.full_depth(), true, true});
}

std::int64_t TensorShard::weight_bytes(const ModelShape& model, const PipelineStage& stage) const {
  const DepthStructure& depth = model.depth;
  // Checked: a shard holds at most the whole model with its LM head apart, which
  // find_shape_problem bounds far inside int64.
  const Checked d = model.d_model;
  const Checked q = Checked(heads) * model.head_dim;
  const Checked kv = Checked(kv_heads) * model.head_dim;
  const Checked mlp_matrices = model.mlp == MlpKind::gated ? 3 : 2;
  const LayerShare share{heads, kv_heads, ffn, shared_ffn, dense_ffn, local_experts};
  // The unique layers the stage executes: the prelude's and coda's once each, the shared
  // block's once per block position any of its recursions reaches here.
  std::vector<bool> block_position(static_cast<std::size_t>(depth.block_layers), false);
  Checked total = 0;
  for (int l = stage.first; l < stage.last; ++l) {
    const int in_block = l - depth.prelude_layers;
    if (in_block < 0 || l >= depth.stacked_depth()) {
      const int unique =
          in_block < 0 ? l : l - depth.stacked_depth() + depth.prelude_layers + depth.block_layers;
      total += layer_elements(model, unique, share);
      continue;
    }
    const auto position = static_cast<std::size_t>(in_block % depth.block_layers);
    if (!block_position[position]) {
      block_position[position] = true;
      total += layer_elements(model, depth.prelude_layers + static_cast<int>(position), share);
    }
    // Adapters are per recursion: each executed block layer carries its recursion's. They shard
    // with their linears: the sharded side of each is split, the other is not.
    const auto recursion = static_cast<std::size_t>(in_block / depth.block_layers);
    if (recursion < depth.lora_rank.size()) {
      const Checked r = depth.lora_rank[recursion];
      total += r * (d + q) + Checked(2) * r * (d + kv) + r * (q + d) + mlp_matrices * r * (d + ffn);
    }
  }
  const Checked embedding = Checked(vocab) * d;
  if (stage.first_stage)
    total += embedding + Checked(model.learned_positions) * d;
  if (stage.last_stage) {
    // The LM head, and the final norm. Tied to the embedding, it is that matrix when one stage
    // holds both, and a copy on the last stage otherwise.
    total += model.tied_embeddings && stage.first_stage ? Checked(0) : embedding;
    total += Checked(model.biases ? 2 : 1) * d;
  }
  return (total * bytes_per_element(model.dtype)).get("TensorShard::weight_bytes");
}

std::int64_t TensorShard::kv_bytes_per_token_per_layer(const ModelShape& model) const {
  // Latent attention's latent is every head's: each GPU of the group holds all of it.
  const Checked elements = model.latent.enabled() ? Checked(model.latent.cached_width())
                                                  : Checked(2) * kv_heads * model.head_dim;
  return (elements * bytes_per_element(model.dtype))
      .get("TensorShard::kv_bytes_per_token_per_layer");
}

namespace {

std::optional<ShapeProblem> find_expert_problem(const ModelShape& model,
                                                const ParallelSpec& parallel) {
  const int e = parallel.expert;
  if (e == 1)
    return std::nullopt;
  const std::string found = fmt::format("{}", e);
  if (!model.is_moe()) {
    return ShapeProblem{
        "expert", expected_found(fmt::format("1 for {}, which has no experts", model.name), found)};
  }
  if (e != parallel.tensor) {
    return ShapeProblem{
        "expert",
        expected_found(fmt::format("1 or parallel.tensor ({}): the experts are spread over the "
                                   "tensor-parallel group (data-parallel attention, which lets EP "
                                   "exceed TP, is not modelled)",
                                   parallel.tensor),
                       found)};
  }
  if (model.experts % e != 0) {
    return ShapeProblem{"expert", expected_found(fmt::format("a divisor of the {} experts of {}",
                                                             model.experts, model.name),
                                                 found)};
  }
  return std::nullopt;
}

std::optional<ShapeProblem> find_pipeline_problem(const ModelShape& model,
                                                  const ParallelSpec& parallel,
                                                  const HardwareSpec& hardware) {
  const int stages = parallel.pipeline;
  const int layers = model.depth.full_depth();
  const std::string found = fmt::format("{}", stages);
  if (stages < 1 || stages > k_max_pipeline_stages) {
    return ShapeProblem{
        "pipeline",
        expected_found(fmt::format("a degree in [1, {}]", k_max_pipeline_stages), found)};
  }
  if (stages > layers) {
    return ShapeProblem{
        "pipeline",
        expected_found(fmt::format("at most the {} layers {} executes (a stage holds at least one)",
                                   layers, model.name),
                       found)};
  }
  const int per_node = hardware.interconnect.gpus_per_node;
  if (parallel.gpus() > per_node && per_node % parallel.tensor != 0) {
    return ShapeProblem{
        "tensor",
        expected_found(fmt::format("a divisor of the {} GPUs of a {} node when a replica spans "
                                   "nodes ({} GPUs), so that no TP group straddles two nodes",
                                   per_node, hardware.name, parallel.gpus()),
                       fmt::format("{}", parallel.tensor))};
  }
  return std::nullopt;
}

}  // namespace

std::optional<ShapeProblem> find_parallel_problem(const ModelShape& model,
                                                  const ParallelSpec& parallel,
                                                  const HardwareSpec& hardware) {
  const auto problem = [](std::string field, std::string message) {
    return ShapeProblem{std::move(field), std::move(message)};
  };
  const int p = parallel.tensor;
  const std::string found = fmt::format("{}", p);
  if (p < 1)
    return problem("tensor", expected_found("a degree >= 1", found));
  if (p > hardware.interconnect.gpus_per_node) {
    return problem("tensor",
                   expected_found(fmt::format("at most the {} GPUs of one {} node (TP all-reduces "
                                              "twice per layer over the node's link)",
                                              hardware.interconnect.gpus_per_node, hardware.name),
                                  found));
  }
  if (model.n_heads % p != 0) {
    return problem("tensor", expected_found(fmt::format("a divisor of the {} attention heads of {}",
                                                        model.n_heads, model.name),
                                            found));
  }
  if (model.n_kv_heads % p != 0 && p % model.n_kv_heads != 0) {
    return problem("tensor",
                   expected_found(fmt::format("a divisor or a multiple of the {} K/V heads of {} "
                                              "(K/V heads are split, or replicated one per GPU)",
                                              model.n_kv_heads, model.name),
                                  found));
  }
  if (auto expert_problem = find_expert_problem(model, parallel))
    return expert_problem;
  // Under EP the routed experts are whole, but shared experts are still split.
  const bool whole_experts = parallel.expert > 1 && model.is_moe() && model.shared_experts == 0;
  if (model.ffn_dim % p != 0 && !whole_experts) {
    return problem(
        "tensor",
        expected_found(fmt::format("a divisor of {}'s {} hidden units",
                                   model.experts > 0 ? "each expert" : "the MLP", model.ffn_dim),
                       found));
  }
  if (model.is_moe() && !model.dense_layers.empty() && model.dense_ffn_dim % p != 0) {
    return problem("tensor",
                   expected_found(fmt::format("a divisor of the {} hidden units of {}'s dense "
                                              "layers",
                                              model.dense_ffn_dim, model.name),
                                  found));
  }
  return find_pipeline_problem(model, parallel, hardware);
}

std::optional<ShapeProblem> find_link_problem(const ParallelSpec& parallel,
                                              const HardwareSpec& hardware) {
  const Interconnect& link = hardware.interconnect;
  bool node_link = parallel.tensor > 1;
  bool network = false;
  for (int s = 0; s + 1 < parallel.pipeline; ++s) {
    const bool crosses = hand_off_crosses_nodes(s, parallel, link.gpus_per_node);
    network = network || crosses;
    node_link = node_link || !crosses;
  }
  if (node_link && !(link.link_bandwidth > 0)) {
    return ShapeProblem{
        "hardware.link_bandwidth_gbps",
        expected_found(fmt::format("a positive link bandwidth for parallel.tensor {} and "
                                   "parallel.pipeline {}",
                                   parallel.tensor, parallel.pipeline),
                       fmt::format("{:g}", link.link_bandwidth / 1e9))};
  }
  if (network && !(link.node_link_bandwidth > 0)) {
    return ShapeProblem{
        "hardware.node_link_bandwidth_gbps",
        expected_found(fmt::format("a positive bandwidth between nodes: a replica of {} GPUs "
                                   "spans {}-GPU nodes",
                                   parallel.gpus(), link.gpus_per_node),
                       fmt::format("{:g}", link.node_link_bandwidth / 1e9))};
  }
  return std::nullopt;
}

}  // namespace exitsim
