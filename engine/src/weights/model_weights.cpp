#include "exitsim/engine/model_weights.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <stdexcept>
#include <system_error>

#include "exitsim/core/error.hpp"
#include "exitsim/engine/safetensors.hpp"
#include "exitsim/traces/atomic_output.hpp"
#include "weights/tensor_source.hpp"
#include "weights/tensor_walk.hpp"

namespace exitsim::engine {
namespace {

// Tensors a checkpoint may carry that are not weights: Hugging Face once saved the rotary
// frequencies as a buffer, and they are recomputed from rope_theta and rope_scaling anyway.
bool is_ignored_buffer(const std::string& name) {
  return name.ends_with(".rotary_emb.inv_freq");
}

// What the config says the file holds, for "unexpected tensor" messages.
std::string describe_contents(const ModelConfig& config) {
  const DepthStructure& depth = config.shape.depth;
  std::string out = fmt::format("{} unique layers", depth.unique_layers());
  out += depth.lora_rank.empty()
             ? ", no LoRA"
             : fmt::format(", LoRA ranks [{}]", fmt::join(depth.lora_rank, ", "));
  out += config.routers ? ", routers" : ", no routers";
  out += config.shape.tied_embeddings ? ", tied embeddings" : "";
  return out;
}

std::string config_name(const ModelConfig& config) {
  return config.config_file.empty() ? "the config" : config.config_file;
}

}  // namespace

namespace detail {

void size_containers(const ModelConfig& config, ModelWeights& w) {
  const DepthStructure& depth = config.shape.depth;
  w.layers.assign(static_cast<std::size_t>(depth.unique_layers()), LayerWeights{});
  w.lora.clear();
  if (!depth.lora_rank.empty()) {
    w.lora.assign(static_cast<std::size_t>(depth.recursions), RecursionLora{});
    for (RecursionLora& recursion : w.lora)
      recursion.layers.resize(static_cast<std::size_t>(depth.block_layers));
  }
  w.routers.assign(config.routers ? static_cast<std::size_t>(depth.recursions) : 0, Router{});
}

}  // namespace detail

std::vector<TensorSpec> model_tensor_specs(const ModelConfig& config) {
  ModelWeights empty;
  detail::size_containers(config, empty);
  std::vector<TensorSpec> specs;
  detail::walk_tensors(config, empty,
                       [&](const TensorSpec& spec, auto&, detail::Init) { specs.push_back(spec); });
  return specs;
}

ModelWeights load_model_weights(const ModelConfig& config) {
  detail::TensorSource source = detail::TensorSource::open(config.weights_path());
  const std::vector<TensorSpec> specs = model_tensor_specs(config);

  // Every check that needs only the headers runs before any tensor is read, so a wrong
  // checkpoint fails in milliseconds even when it is gigabytes.
  const std::string where = config.weights_path().string();
  std::set<std::string> wanted;
  for (const TensorSpec& spec : specs) {
    wanted.insert(spec.name);
    if (!source.has(spec.name)) {
      throw InputError({where, 0, 0, spec.name},
                       expected_found("a tensor of shape " + format_shape(spec.shape), "none"));
    }
    const TensorInfo& info = source.info(spec.name);
    if (info.shape != spec.shape) {
      throw InputError(
          {source.file_of(spec.name).path(), 0, 0, spec.name},
          expected_found("shape " + format_shape(spec.shape), format_shape(info.shape)));
    }
    if (info.dtype != "F32" && info.dtype != "F16" && info.dtype != "BF16") {
      throw InputError({source.file_of(spec.name).path(), 0, 0, spec.name},
                       expected_found("dtype F32, F16 or BF16", info.dtype));
    }
  }
  const bool hf_tied_head = config.format == ModelFormat::hf_llama && config.shape.tied_embeddings;
  for (const std::string& name : source.names()) {
    if (wanted.contains(name) || is_ignored_buffer(name) ||
        (hf_tied_head && name == "lm_head.weight")) {
      continue;
    }
    const TensorInfo& info = source.info(name);
    throw InputError({source.file_of(name).path(), 0, 0, name},
                     expected_found(fmt::format("no such tensor ({} describes {})",
                                                config_name(config), describe_contents(config)),
                                    fmt::format("a {} tensor of shape {}", info.dtype,
                                                format_shape(info.shape))));
  }

  ModelWeights w;
  detail::size_containers(config, w);
  detail::walk_tensors(config, w, [&](const TensorSpec& spec, auto& target, detail::Init) {
    const std::vector<float> values = source.file_of(spec.name).read_floats(spec.name, spec.shape);
    // A NaN or infinite weight decodes without complaint and fails much later, far from its
    // cause (an internal error of the quality table): refused here, naming file and tensor.
    if (const auto bad =
            std::find_if(values.begin(), values.end(), [](float v) { return !std::isfinite(v); });
        bad != values.end()) {
      throw InputError({source.file_of(spec.name).path(), 0, 0, spec.name},
                       expected_found("finite model weights",
                                      fmt::format("{} at element {}", *bad, bad - values.begin())));
    }
    detail::resize_target(target, spec);
    const auto out = detail::target_values(target);
    std::copy(values.begin(), values.end(), out.begin());
  });
  if (config.shape.tied_embeddings)
    w.lm_head = w.embedding;
  return w;
}

void check_weights_shape(const ModelConfig& config, const ModelWeights& weights) {
  const DepthStructure& depth = config.shape.depth;
  const auto count_error = [](const char* what, std::size_t expected, std::size_t found) {
    return std::invalid_argument(
        fmt::format("model weights: expected {} {}, found {}", expected, what, found));
  };
  if (weights.layers.size() != static_cast<std::size_t>(depth.unique_layers()))
    throw count_error("unique layers", static_cast<std::size_t>(depth.unique_layers()),
                      weights.layers.size());
  const std::size_t lora = depth.lora_rank.empty() ? 0 : static_cast<std::size_t>(depth.recursions);
  if (weights.lora.size() != lora)
    throw count_error("LoRA recursions", lora, weights.lora.size());
  for (const RecursionLora& recursion : weights.lora) {
    if (recursion.layers.size() != static_cast<std::size_t>(depth.block_layers)) {
      throw count_error("LoRA layers per recursion", static_cast<std::size_t>(depth.block_layers),
                        recursion.layers.size());
    }
  }
  const std::size_t routers = config.routers ? static_cast<std::size_t>(depth.recursions) : 0;
  if (weights.routers.size() != routers)
    throw count_error("routers", routers, weights.routers.size());
  detail::walk_tensors(
      config, weights, [&](const TensorSpec& spec, const auto& target, detail::Init) {
        if (!detail::target_matches(target, spec)) {
          throw std::invalid_argument(fmt::format("model weights: {} does not have shape {}",
                                                  spec.name, format_shape(spec.shape)));
        }
      });
  if (weights.lm_head.rows() != config.shape.vocab ||
      weights.lm_head.cols() != config.shape.d_model) {
    throw std::invalid_argument("model weights: lm_head does not have shape [vocab, d_model]");
  }
}

void save_model(const std::filesystem::path& dir, const ModelConfig& config,
                const ModelWeights& weights, DType file_dtype) {
  check_weights_shape(config, weights);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    throw InputError({dir.string(), 0, 0, ""}, "cannot create the directory: " + ec.message());
  std::vector<TensorToWrite> tensors;
  detail::walk_tensors(
      config, weights, [&](const TensorSpec& spec, const auto& target, detail::Init) {
        tensors.push_back({spec.name, file_dtype, spec.shape, detail::target_values(target)});
      });
  write_safetensors(dir / "model.safetensors", tensors,
                    {{"format", "pt"}, {"exitsim", k_model_format_v1}});
  ModelConfig saved = config;
  saved.weights = "model.safetensors";
  traces::write_file_atomically((dir / k_exitsim_config_file).string(), model_config_json(saved));
}

}  // namespace exitsim::engine
