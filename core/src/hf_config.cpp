#include "exitsim/core/hf_config.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <system_error>
#include <vector>

#include "exitsim/core/csv_fields.hpp"
#include "exitsim/core/error.hpp"
#include "exitsim/core/model_validation.hpp"
#include "exitsim/core/suggest.hpp"
#include "hf_config_keys.hpp"

namespace exitsim {
namespace {

using hf::json;
using hf::Keys;
using hf::shown;

constexpr std::uint64_t k_max_config_bytes = 16u << 20;
constexpr int k_max_nesting = 32;

// Thrown from inside the parser callback, turned into an InputError outside it.
struct Refusal {
  std::string message;
};

json parse_strictly(std::string_view text, const std::string& file) {
  const std::string_view body = without_utf8_bom(text);
  // nlohmann stops at a NUL as at the end: what follows one would be ignored without a word.
  if (const std::size_t nul = body.find('\0'); nul != std::string_view::npos) {
    throw InputError({file, 0, 0, ""},
                     expected_found("JSON text", fmt::format("a NUL byte at byte {}", nul + 1)));
  }
  // A key given twice is refused rather than "last one wins", which would pick one silently.
  std::vector<std::set<std::string>> open_objects;
  const auto check = [&](int depth, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start:
        if (depth >= k_max_nesting) {
          throw Refusal{expected_found(fmt::format("at most {} levels of nesting", k_max_nesting),
                                       "deeper nesting")};
        }
        if (event == json::parse_event_t::object_start)
          open_objects.emplace_back();
        break;
      case json::parse_event_t::object_end:
        open_objects.pop_back();
        break;
      case json::parse_event_t::key:
        if (!open_objects.back().insert(parsed.get<std::string>()).second) {
          throw Refusal{
              expected_found("each key once per object", "the key " + shown(parsed) + " twice")};
        }
        break;
      default:
        break;
    }
    return true;
  };
  try {
    return json::parse(body.begin(), body.end(), check);
  } catch (const Refusal& refusal) {
    throw InputError({file, 0, 0, ""}, refusal.message);
  } catch (const json::exception& e) {
    // A syntax error, or a number beyond a double (1e400), in the library's words.
    throw InputError({file, 0, 0, ""}, expected_found("valid JSON", library_message(e)));
  }
}

std::vector<std::string> model_type_names() {
  return {std::begin(k_hf_model_types), std::end(k_hf_model_types)};
}

// The dtype from the language model's keys, else the config's (Llama 4's and Gemma 3's
// text_config may leave it to the top level).
DType read_dtype(const Keys& text, const Keys& top) {
  // transformers 5 writes "dtype"; 4 writes "torch_dtype".
  for (const Keys* keys : {&text, &top}) {
    const char* key = keys->find("torch_dtype") != nullptr ? "torch_dtype" : "dtype";
    const json* value = keys->find(key);
    if (value == nullptr)
      continue;
    static const std::array<std::pair<const char*, DType>, 3> names = {
        {{"float32", DType::fp32}, {"bfloat16", DType::bf16}, {"float16", DType::fp16}}};
    for (const auto& [name, dtype] : names) {
      if (*value == name)
        return dtype;
    }
    throw keys->error(key, "one of float32, bfloat16, float16", shown(*value));
  }
  return DType::bf16;
}

std::string model_name(const Keys& keys) {
  if (const json* name = keys.find("_name_or_path");
      name != nullptr && name->is_string() && !name->get<std::string>().empty()) {
    return name->get<std::string>();
  }
  const std::filesystem::path folder =
      std::filesystem::path(keys.file()).lexically_normal().parent_path().filename();
  return folder.empty() ? "hf-config" : folder.string();
}

// Qwen3-MoE's experts: each the width moe_intermediate_size (intermediate_size is a dense layer's,
// which a model with every layer a mixture has none of). Dense layers among the mixtures
// (decoder_sparse_step above 1, mlp_only_layers) are not read: refused.
void read_qwen3_moe(const Keys& keys, ModelShape& shape) {
  shape.experts = keys.integer("num_experts", 1, hf::k_max_experts);
  shape.experts_per_token = keys.integer("num_experts_per_tok", 1, shape.experts);
  shape.ffn_dim = keys.integer("moe_intermediate_size", 1, hf::k_max_intermediate);
  keys.require_absent_or("decoder_sparse_step", 1,
                         "every layer a mixture; dense layers between mixtures are not modelled");
  keys.require_absent_or("mlp_only_layers", json::array(),
                         "every layer a mixture; dense layers among them are not modelled");
}

// A head_dim the config must give (Gemma's is not hidden / heads), may give, or that is
// hidden_size / num_attention_heads as in transformers.
std::int64_t read_head_dim(const Keys& keys, const ModelShape& shape, bool required,
                           std::optional<std::int64_t> fallback) {
  if (required || fallback)
    return keys.integer("head_dim", 1, hf::k_max_head_dim, fallback);
  if (keys.find("head_dim") == nullptr && shape.d_model % shape.n_heads != 0) {
    throw keys.error("head_dim",
                     fmt::format("a value, as hidden_size ({}) is not a multiple of "
                                 "num_attention_heads ({})",
                                 shape.d_model, shape.n_heads),
                     "none");
  }
  return keys.integer("head_dim", 1, hf::k_max_head_dim, shape.d_model / shape.n_heads);
}

// The keys every family but GPT-2 spells alike: dimensions, layers, context, tied embeddings.
void read_llama_keys(const Keys& keys, const std::string& type, ModelShape& shape) {
  const bool gemma = type.rfind("gemma", 0) == 0;
  const bool gemma3 = type.rfind("gemma3", 0) == 0;
  const auto fallback = [&](std::string_view key) {
    return gemma3 ? hf::gemma3_default(key) : std::nullopt;
  };
  shape.d_model = keys.integer("hidden_size", 1, hf::k_max_hidden, fallback("hidden_size"));
  shape.n_heads =
      keys.integer("num_attention_heads", 1, hf::k_max_heads, fallback("num_attention_heads"));
  shape.n_kv_heads = keys.integer("num_key_value_heads", 1, hf::k_max_heads,
                                  fallback("num_key_value_heads").value_or(shape.n_heads));
  // DeepSeek's head_dim is its query/key width, read with its latent attention.
  if (type.rfind("deepseek", 0) != 0)
    shape.head_dim = read_head_dim(keys, shape, gemma, fallback("head_dim"));
  shape.ffn_dim =
      keys.integer("intermediate_size", 1, hf::k_max_intermediate, fallback("intermediate_size"));
  shape.vocab = keys.integer("vocab_size", 1, hf::k_max_vocab, fallback("vocab_size"));
  shape.depth = DepthStructure::plain(static_cast<int>(
      keys.integer("num_hidden_layers", 1, hf::k_max_layers, fallback("num_hidden_layers"))));
  shape.max_context = keys.integer("max_position_embeddings", 1, hf::k_max_context,
                                   fallback("max_position_embeddings"));
  shape.tied_embeddings = keys.boolean("tie_word_embeddings", gemma);
  shape.mlp = MlpKind::gated;
}

// Qwen's sliding window on the layers past max_window_layers is not read: refused when on.
void refuse_qwen_window(const Keys& keys) {
  if (keys.boolean("use_sliding_window", false)) {
    throw keys.error("use_sliding_window",
                     "false (Qwen's sliding window from max_window_layers on is not read)", "true");
  }
}

void read_family(const Keys& text, const std::string& type, ModelShape& shape) {
  if (type == "gpt2") {
    hf::read_gpt2(text, shape);
    return;
  }
  read_llama_keys(text, type, shape);
  if (type == "mixtral") {
    shape.experts = text.integer("num_local_experts", 1, hf::k_max_experts);
    shape.experts_per_token = text.integer("num_experts_per_tok", 1, shape.experts);
  }
  if (type == "mistral" || type == "mixtral")
    hf::read_mistral_window(text, shape);
  if (type.rfind("qwen", 0) == 0)
    refuse_qwen_window(text);
  if (type == "qwen3" || type == "qwen3_moe")
    shape.qk_norm = true;
  if (type == "qwen3_moe")
    read_qwen3_moe(text, shape);
  if (type == "gemma2" || type.rfind("gemma3", 0) == 0)
    hf::read_gemma_layers(text, type, shape);
  if (type.rfind("deepseek", 0) == 0)
    hf::read_deepseek(text, shape);
  if (type.rfind("llama4", 0) == 0)
    hf::read_llama4(text, shape);
}

void refuse_quantized(const Keys& keys) {
  if (const json* quantization = keys.find("quantization_config"); quantization != nullptr) {
    throw keys.error("quantization_config",
                     "none (a quantized checkpoint's weights are not torch_dtype's; give "
                     "model.dtype and the shape keys instead)",
                     quantization->is_object() ? "an object" : shown(*quantization));
  }
}

}  // namespace

std::string hf_key(const std::string& field, const std::string& type) {
  using Names = std::vector<std::pair<const char*, const char*>>;
  // Families whose keys differ from Llama's, first.
  static const std::vector<std::pair<std::string, Names>> families = {
      {"qwen3_moe", {{"experts", "num_experts"}, {"ffn_dim", "moe_intermediate_size"}}},
      {"deepseek",
       {{"experts", "n_routed_experts"},
        {"ffn_dim", "moe_intermediate_size"},
        {"dense_ffn_dim", "intermediate_size"},
        {"shared_experts", "n_shared_experts"},
        {"head_dim", "qk_nope_head_dim"}}},
      {"llama4",
       {{"experts", "num_local_experts"},
        {"dense_ffn_dim", "intermediate_size_mlp"},
        {"window", "attention_chunk_size"}}},
      {"gemma", {{"window", "sliding_window"}}},
      {"mistral", {{"window", "sliding_window"}}},
      {"mixtral", {{"window", "sliding_window"}}},
      {"gpt2",
       {{"d_model", "n_embd"},
        {"n_heads", "n_head"},
        {"n_kv_heads", "n_head"},
        {"ffn_dim", "n_inner"},
        {"depth.prelude", "n_layer"},
        {"max_context", "n_positions"}}},
  };
  for (const auto& [family, names] : families) {
    if (type.rfind(family, 0) != 0)
      continue;
    for (const auto& [ours, theirs] : names) {
      if (field == ours)
        return theirs;
    }
  }
  static const Names names = {{"d_model", "hidden_size"},
                              {"n_heads", "num_attention_heads"},
                              {"n_kv_heads", "num_key_value_heads"},
                              {"head_dim", "head_dim"},
                              {"ffn_dim", "intermediate_size"},
                              {"vocab", "vocab_size"},
                              {"depth.prelude", "num_hidden_layers"},
                              {"experts", "num_local_experts"},
                              {"experts_per_token", "num_experts_per_tok"},
                              // The engine's name for the context window (ModelConfig).
                              {"max_positions", "max_position_embeddings"},
                              {"max_context", "max_position_embeddings"}};
  for (const auto& [ours, theirs] : names) {
    if (field == ours)
      return theirs;
  }
  return field;
}

ModelShape parse_hf_config(std::string_view text, const std::string& file) {
  const json root = parse_strictly(text, file);
  if (!root.is_object())
    throw InputError({file, 0, 0, ""}, expected_found("a JSON object", shown(root)));
  const Keys keys(root, file);

  const std::vector<std::string> types = model_type_names();
  const json* type_value = keys.find("model_type");
  const auto known = [&] {
    return type_value != nullptr && type_value->is_string() &&
           std::find(types.begin(), types.end(), type_value->get<std::string>()) != types.end();
  };
  if (!known())
    throw keys.error("model_type", one_of(types), type_value ? shown(*type_value) : "none");
  const std::string type = type_value->get<std::string>();
  refuse_quantized(keys);
  // Llama 4's and Gemma 3's multimodal configs hold the language model in text_config.
  const bool multimodal = type == "llama4" || type == "gemma3";
  const Keys language = multimodal ? keys.nested("text_config") : keys;
  if (multimodal)
    refuse_quantized(language);

  ModelShape shape;
  shape.name = model_name(keys);
  read_family(language, type, shape);
  shape.dtype = read_dtype(language, keys);
  if (const std::optional<ShapeProblem> problem = find_shape_problem(shape)) {
    throw InputError({file, 0, 0, language.path(hf_key(problem->field, type))}, problem->message);
  }
  return shape;
}

ModelShape read_hf_config(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    const bool exists = std::filesystem::exists(path, ec);
    throw InputError({path, 0, 0, ""}, expected_found("a readable config.json file",
                                                      exists ? "something else" : "none"));
  }
  const std::uintmax_t size = std::filesystem::file_size(path, ec);
  if (ec)
    throw InputError({path, 0, 0, ""}, "cannot read the file size: " + ec.message());
  if (size > k_max_config_bytes) {
    throw InputError({path, 0, 0, ""},
                     expected_found(fmt::format("at most {} bytes", k_max_config_bytes),
                                    fmt::format("{} bytes", size)));
  }
  std::ifstream in(path, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in.good() && !in.eof())
    throw InputError({path, 0, 0, ""}, "cannot read the file");
  return parse_hf_config(text, path);
}

}  // namespace exitsim
