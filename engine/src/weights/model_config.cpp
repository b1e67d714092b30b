#include "exitsim/engine/model_config.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <span>
#include <string>
#include <system_error>

#include "exitsim/core/error.hpp"
#include "exitsim/core/hf_config.hpp"
#include "exitsim/core/model_validation.hpp"
#include "exitsim/core/suggest.hpp"
#include "weights/strict_json.hpp"

namespace exitsim::engine {
namespace {

using detail::describe_json;
using detail::ObjectReader;
using nlohmann::json;

// Config files are small; anything larger is not a config.
constexpr std::uint64_t k_max_config_bytes = 16u << 20;
// Bounds that keep every product of dimensions far from int64 overflow while admitting any real
// model (the widest vocabularies are a few hundred thousand tokens).
constexpr std::int64_t k_max_dimension = std::int64_t{1} << 24;
constexpr int k_max_layers = 1 << 16;

std::string default_name(const std::filesystem::path& dir) {
  const std::filesystem::path clean = dir.lexically_normal();
  const std::string name = (clean.has_filename() ? clean : clean.parent_path()).filename().string();
  return name.empty() ? "model" : name;
}

TokenizerKind parse_tokenizer(const ObjectReader& reader) {
  const std::string name = reader.string("tokenizer", "bytes");
  if (name == "bytes")
    return TokenizerKind::bytes;
  if (name == "ids")
    return TokenizerKind::ids;
  if (name == "bpe")
    return TokenizerKind::bpe;
  const std::array<std::string, 3> names = {"bytes", "ids", "bpe"};
  const std::string near = nearest_match(name, names);
  throw reader.error("tokenizer", "\"bytes\", \"ids\" or \"bpe\"",
                     detail::json_quoted(name) +
                         (near.empty() ? "" : fmt::format(" (did you mean \"{}\"?)", near)));
}

DepthStructure parse_depth(const json& value, const std::string& file) {
  const ObjectReader reader(value, file, "depth.");
  static const std::array<std::string, 6> known = {"prelude", "block",     "recursions",
                                                   "coda",    "lora_rank", "exit_points"};
  reader.reject_unknown(known);
  DepthStructure depth;
  depth.prelude_layers = static_cast<int>(reader.integer("prelude", 0, k_max_layers, 0));
  depth.block_layers = static_cast<int>(reader.integer("block", 0, k_max_layers, 0));
  depth.recursions = static_cast<int>(reader.integer("recursions", 0, k_max_layers, 0));
  depth.coda_layers = static_cast<int>(reader.integer("coda", 0, k_max_layers, 0));
  depth.lora_rank = reader.integers("lora_rank", 0, k_max_layers);
  depth.exit_points = reader.integers("exit_points", 1, std::numeric_limits<int>::max());
  return depth;
}

json parse_object(std::string_view text, const std::string& file) {
  json root = detail::parse_strict_json(text, file, "", 32);
  if (!root.is_object())
    throw InputError({file, 0, 0, ""}, expected_found("a JSON object", describe_json(root)));
  return root;
}

// The "rope_scaling" object of either config (absent, or null in config.json: no scaling). Only
// Llama 3.1's "llama3" scaling is run; its four numbers are required, as transformers requires
// them, and any other key is refused, since it could only change the numerics. config.json may
// spell the type key "type" (older transformers) or write both spellings.
RopeScaling parse_rope_scaling(const ObjectReader& top, bool hugging_face) {
  const json* value = top.object("rope_scaling");
  if (value == nullptr)
    return {};
  const ObjectReader reader(*value, top.file(), top.field("rope_scaling."), hugging_face);
  std::string type_key = "rope_type";
  const json* type = reader.find(type_key);
  if (const json* legacy = hugging_face ? reader.find("type") : nullptr; legacy != nullptr) {
    if (type == nullptr) {
      type_key = "type";
      type = legacy;
    } else if (*legacy != *type) {
      throw reader.error("type", fmt::format("the same as rope_type ({})", type->dump()),
                         describe_json(*legacy));
    }
  }
  // transformers writes {"rope_type": "default"} for unscaled rotary embeddings.
  if (hugging_face && type != nullptr && *type == "default") {
    static const std::array<std::string, 2> only_type = {"rope_type", "type"};
    reader.reject_unknown(only_type);
    return {};
  }
  if (type == nullptr || *type != "llama3") {
    throw reader.error(type_key,
                       hugging_face ? "\"llama3\" or \"default\" (or a null rope_scaling)"
                                    : "\"llama3\" (or no rope_scaling)",
                       type == nullptr ? "none" : describe_json(*type));
  }
  static const std::array<std::string, 6> known = {"rope_type",
                                                   "factor",
                                                   "low_freq_factor",
                                                   "high_freq_factor",
                                                   "original_max_position_embeddings",
                                                   "type"};
  reader.reject_unknown(std::span(known).first(hugging_face ? 6 : 5));
  RopeScaling scaling;
  scaling.kind = RopeScalingKind::llama3;
  scaling.factor = reader.positive_number("factor");
  scaling.low_freq_factor = reader.positive_number("low_freq_factor");
  scaling.high_freq_factor = reader.positive_number("high_freq_factor");
  scaling.original_max_position_embeddings =
      reader.integer("original_max_position_embeddings", 1, k_max_dimension);
  return scaling;
}

// Doubles print in their shortest round-trip form ("1e-05"), not as the float's exact value.
double shortest_double(float value) {
  return std::stod(fmt::format("{}", value));
}

}  // namespace

std::string_view to_string(TokenizerKind kind) {
  switch (kind) {
    case TokenizerKind::bytes:
      return "bytes";
    case TokenizerKind::bpe:
      return "bpe";
    case TokenizerKind::ids:
      break;
  }
  return "ids";
}

void validate_model_config(const ModelConfig& config) {
  const auto fail = [&](const std::string& field, const std::string& message) {
    const std::string shown =
        config.format == ModelFormat::hf_llama ? hf_key(field, "llama") : field;
    return InputError({config.config_file, 0, 0, shown}, message);
  };
  if (const std::optional<ShapeProblem> problem = find_shape_problem(config.shape))
    throw fail(problem->field, problem->message);
  const ModelShape& shape = config.shape;
  if (shape.head_dim % 2 != 0) {
    throw fail("head_dim", expected_found("an even number (rotary embeddings rotate pairs)",
                                          fmt::format("{}", shape.head_dim)));
  }
  if (shape.mlp != MlpKind::gated)
    throw fail("mlp", expected_found("a gated (SwiGLU) MLP", "a plain one"));
  if (shape.is_moe()) {
    throw fail("experts", expected_found("0 (the engine runs dense MLPs; mixtures of experts are "
                                         "simulated only)",
                                         fmt::format("{}", shape.experts)));
  }
  if (config.tokenizer == TokenizerKind::bytes && shape.vocab < 256) {
    throw fail("vocab", expected_found("at least 256 for the \"bytes\" tokenizer",
                                       fmt::format("{}", shape.vocab)));
  }
  if (config.routers && !shape.depth.is_recursive())
    throw fail("routers", expected_found("false for a model without recursions", "true"));
  if (!(config.rms_eps > 0) || !std::isfinite(config.rms_eps))
    throw fail("rms_eps", expected_found("a positive number", fmt::format("{}", config.rms_eps)));
  if (!(config.rope_theta > 0) || !std::isfinite(config.rope_theta)) {
    throw fail("rope_theta",
               expected_found("a positive number", fmt::format("{}", config.rope_theta)));
  }
  if (const RopeScaling& s = config.rope_scaling; s.kind == RopeScalingKind::llama3) {
    if (!(s.factor >= 1) || !std::isfinite(s.factor)) {
      throw fail("rope_scaling.factor", expected_found("a number >= 1 (it divides the low "
                                                       "frequencies)",
                                                       fmt::format("{}", s.factor)));
    }
    if (!(s.low_freq_factor > 0) || !std::isfinite(s.low_freq_factor)) {
      throw fail("rope_scaling.low_freq_factor",
                 expected_found("a positive number", fmt::format("{}", s.low_freq_factor)));
    }
    if (!(s.high_freq_factor > s.low_freq_factor) || !std::isfinite(s.high_freq_factor)) {
      throw fail(
          "rope_scaling.high_freq_factor",
          expected_found(fmt::format("a number above low_freq_factor ({})", s.low_freq_factor),
                         fmt::format("{}", s.high_freq_factor)));
    }
    if (s.original_max_position_embeddings < 1) {
      throw fail("rope_scaling.original_max_position_embeddings",
                 expected_found("a positive integer",
                                fmt::format("{}", s.original_max_position_embeddings)));
    }
  }
  if (config.max_positions < 1) {
    throw fail("max_positions",
               expected_found("a positive integer", fmt::format("{}", config.max_positions)));
  }
  if (config.weights.empty())
    throw fail("weights", expected_found("a file name", "an empty string"));
}

ModelConfig parse_exitsim_config(std::string_view text, const std::string& file,
                                 const std::filesystem::path& dir) {
  const json root = parse_object(text, file);
  const ObjectReader reader(root, file, "");
  static const std::array<std::string, 17> known = {
      "format",          "name",  "d_model", "n_heads",    "n_kv_heads",   "head_dim",
      "ffn_dim",         "vocab", "rms_eps", "rope_theta", "rope_scaling", "max_positions",
      "tied_embeddings", "depth", "routers", "tokenizer",  "weights"};
  reader.reject_unknown(known);
  const json* format = reader.find("format");
  if (format == nullptr || *format != k_model_format_v1) {
    throw reader.error("format", detail::json_quoted(k_model_format_v1),
                       format == nullptr ? "none" : describe_json(*format));
  }
  ModelConfig config;
  config.dir = dir;
  config.config_file = file;
  config.format = ModelFormat::exitsim;
  ModelShape& shape = config.shape;
  shape.name = reader.string("name", default_name(dir));
  shape.d_model = reader.integer("d_model", 1, k_max_dimension);
  shape.n_heads = reader.integer("n_heads", 1, k_max_dimension);
  shape.n_kv_heads = reader.integer("n_kv_heads", 1, k_max_dimension);
  shape.head_dim = reader.integer("head_dim", 1, k_max_dimension);
  shape.ffn_dim = reader.integer("ffn_dim", 1, k_max_dimension);
  shape.vocab = reader.integer("vocab", 1, k_max_dimension);
  shape.dtype = DType::fp32;
  shape.mlp = MlpKind::gated;
  shape.tied_embeddings = reader.boolean("tied_embeddings", false);
  const json* depth = reader.object("depth");
  if (depth == nullptr)
    throw reader.error("depth", "an object", "none");
  shape.depth = parse_depth(*depth, file);
  config.rms_eps = reader.positive_float("rms_eps", 1e-5F);
  config.rope_theta = reader.positive_number("rope_theta", 10000.0);
  config.rope_scaling = parse_rope_scaling(reader, /*hugging_face=*/false);
  config.max_positions = reader.integer("max_positions", 1, k_max_dimension, 4096);
  config.routers = reader.boolean("routers", false);
  config.tokenizer = parse_tokenizer(reader);
  config.weights = reader.string("weights", "model.safetensors");
  validate_model_config(config);
  return config;
}

ModelConfig parse_hf_llama_config(std::string_view text, const std::string& file,
                                  const std::filesystem::path& dir) {
  const json root = parse_object(text, file);
  // Hugging Face configs carry many keys we have no use for (token ids, versions), so unknown
  // keys pass; the keys that would change the numerics are refused below instead.
  const ObjectReader reader(root, file, "", /*null_is_absent=*/true);
  bool is_llama = reader.find("model_type") != nullptr && *reader.find("model_type") == "llama";
  if (const json* architectures = reader.find("architectures"); architectures != nullptr) {
    is_llama = is_llama ||
               (architectures->is_array() && std::find(architectures->begin(), architectures->end(),
                                                       "LlamaForCausalLM") != architectures->end());
  }
  if (!is_llama) {
    const json* type = reader.find("model_type");
    throw reader.error("model_type", "\"llama\" (or architectures containing \"LlamaForCausalLM\")",
                       type == nullptr ? "none" : describe_json(*type));
  }
  // transformers v5 moves rope_theta and the scaling into "rope_parameters"; read as an unknown
  // key it would leave theta at its default and the scaling off: silently other numerics.
  if (const json* parameters = reader.find("rope_parameters"); parameters != nullptr) {
    throw reader.error("rope_parameters",
                       "none (write rope_theta and rope_scaling at the top level, as "
                       "transformers 4 does)",
                       describe_json(*parameters));
  }
  const RopeScaling rope_scaling = parse_rope_scaling(reader, /*hugging_face=*/true);
  for (const char* key : {"attention_bias", "mlp_bias"}) {
    if (reader.boolean(key, false))
      throw reader.error(key, "false (biases are not supported)", "true");
  }
  if (const std::string act = reader.string("hidden_act", "silu"); act != "silu")
    throw reader.error("hidden_act", "\"silu\" (SwiGLU)", detail::json_quoted(act));

  ModelConfig config;
  config.dir = dir;
  config.config_file = file;
  config.format = ModelFormat::hf_llama;
  ModelShape& shape = config.shape;
  const json* name = reader.find("_name_or_path");
  shape.name = name != nullptr && name->is_string() && !name->get<std::string>().empty()
                   ? name->get<std::string>()
                   : default_name(dir);
  shape.d_model = reader.integer("hidden_size", 1, k_max_dimension);
  shape.n_heads = reader.integer("num_attention_heads", 1, k_max_dimension);
  shape.n_kv_heads = reader.integer("num_key_value_heads", 1, k_max_dimension, shape.n_heads);
  if (reader.find("head_dim") == nullptr && shape.d_model % shape.n_heads != 0) {
    throw reader.error("head_dim",
                       fmt::format("a value, as hidden_size ({}) is not a multiple of "
                                   "num_attention_heads ({})",
                                   shape.d_model, shape.n_heads),
                       "none");
  }
  shape.head_dim = reader.integer("head_dim", 1, k_max_dimension, shape.d_model / shape.n_heads);
  shape.ffn_dim = reader.integer("intermediate_size", 1, k_max_dimension);
  shape.vocab = reader.integer("vocab_size", 1, k_max_dimension);
  shape.dtype = DType::fp32;
  shape.mlp = MlpKind::gated;
  shape.tied_embeddings = reader.boolean("tie_word_embeddings", false);
  shape.depth =
      DepthStructure::plain(static_cast<int>(reader.integer("num_hidden_layers", 1, k_max_layers)));
  // LlamaConfig's own defaults for the keys older configs leave out.
  config.rms_eps = reader.positive_float("rms_norm_eps", 1e-6F);
  config.rope_theta = reader.positive_number("rope_theta", 10000.0);
  config.rope_scaling = rope_scaling;
  config.max_positions = reader.integer("max_position_embeddings", 1, k_max_dimension, 2048);
  config.routers = false;
  std::error_code ec;
  // A checkpoint's tokenizer.json (byte-level BPE) lets --text prompts run; without one the
  // prompts come as token ids.
  config.tokenizer = std::filesystem::is_regular_file(config.tokenizer_path(), ec)
                         ? TokenizerKind::bpe
                         : TokenizerKind::ids;
  const bool sharded = !std::filesystem::exists(dir / "model.safetensors", ec) &&
                       std::filesystem::exists(dir / "model.safetensors.index.json", ec);
  config.weights = sharded ? "model.safetensors.index.json" : "model.safetensors";
  validate_model_config(config);
  return config;
}

ModelConfig load_model_config(const std::filesystem::path& dir,
                              std::vector<int> exit_layers_override) {
  std::error_code ec;
  const std::filesystem::path ours = dir / k_exitsim_config_file;
  const std::filesystem::path theirs = dir / k_hf_config_file;
  ModelConfig config;
  if (std::filesystem::exists(ours, ec)) {
    config =
        parse_exitsim_config(detail::read_small_file(ours, k_max_config_bytes), ours.string(), dir);
  } else if (std::filesystem::exists(theirs, ec)) {
    config = parse_hf_llama_config(detail::read_small_file(theirs, k_max_config_bytes),
                                   theirs.string(), dir);
  } else {
    throw InputError(
        {dir.string(), 0, 0, ""},
        expected_found(
            fmt::format("a model directory with {} or {}", k_exitsim_config_file, k_hf_config_file),
            std::filesystem::is_directory(dir, ec) ? "neither" : "no such directory"));
  }
  if (!exit_layers_override.empty()) {
    config.shape.depth.exit_points = std::move(exit_layers_override);
    validate_model_config(config);
  }
  return config;
}

std::string model_config_json(const ModelConfig& config) {
  const ModelShape& shape = config.shape;
  const DepthStructure& depth = shape.depth;
  nlohmann::ordered_json out = {{"format", k_model_format_v1},
                                {"name", shape.name},
                                {"d_model", shape.d_model},
                                {"n_heads", shape.n_heads},
                                {"n_kv_heads", shape.n_kv_heads},
                                {"head_dim", shape.head_dim},
                                {"ffn_dim", shape.ffn_dim},
                                {"vocab", shape.vocab},
                                {"rms_eps", shortest_double(config.rms_eps)},
                                {"rope_theta", config.rope_theta}};
  // Written only when there is one, so an unscaled model's file reads as it always has.
  if (const RopeScaling& s = config.rope_scaling; s.kind != RopeScalingKind::none) {
    out["rope_scaling"] = {
        {"rope_type", to_string(s.kind)},
        {"factor", s.factor},
        {"low_freq_factor", s.low_freq_factor},
        {"high_freq_factor", s.high_freq_factor},
        {"original_max_position_embeddings", s.original_max_position_embeddings}};
  }
  out["max_positions"] = config.max_positions;
  out["tied_embeddings"] = shape.tied_embeddings;
  out["depth"] = {{"prelude", depth.prelude_layers}, {"block", depth.block_layers},
                  {"recursions", depth.recursions},  {"coda", depth.coda_layers},
                  {"lora_rank", depth.lora_rank},    {"exit_points", depth.exit_points}};
  out["routers"] = config.routers;
  out["tokenizer"] = to_string(config.tokenizer);
  out["weights"] = config.weights;
  return out.dump(2) + "\n";
}

}  // namespace exitsim::engine
