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

namespace exitsim {
namespace {

using nlohmann::json;

constexpr std::uint64_t k_max_config_bytes = 16u << 20;
// The scenario keys' ranges (scenarios/src/schema_model.cpp), so that a model is refused the
// same way whether its shape comes from config.json or from model.* keys.
constexpr std::int64_t k_max_hidden = std::int64_t{1} << 20;        // model.d_model
constexpr std::int64_t k_max_heads = 4096;                          // model.n_heads, n_kv_heads
constexpr std::int64_t k_max_head_dim = 4096;                       // model.head_dim
constexpr std::int64_t k_max_intermediate = std::int64_t{1} << 22;  // model.ffn_dim
constexpr std::int64_t k_max_vocab = std::int64_t{1} << 24;         // model.vocab
constexpr std::int64_t k_max_layers = 100000;                       // model.depth.prelude
constexpr std::int64_t k_max_context = 1'000'000'000;               // model.max_context
constexpr std::int64_t k_max_experts = 65536;                       // model.experts
constexpr int k_max_nesting = 32;

// Thrown from inside the parser callback, turned into an InputError outside it.
struct Refusal {
  std::string message;
};

// A value as a message shows it: JSON text, cut to 80 characters.
std::string shown(const json& value) {
  constexpr std::size_t k_longest = 80;
  const std::string text =
      value.dump(-1, ' ', /*ensure_ascii=*/true, json::error_handler_t::replace);
  return text.size() > k_longest ? text.substr(0, k_longest) + "..." : text;
}

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

// Typed access to the top-level keys; a null value counts as absent (transformers writes
// "head_dim": null and "sliding_window": null).
class Keys {
 public:
  Keys(const json& root, std::string file) : root_(root), file_(std::move(file)) {}

  const json* find(std::string_view key) const {
    const auto it = root_.find(std::string(key));
    return it == root_.end() || it->is_null() ? nullptr : &*it;
  }
  InputError error(std::string_view key, const std::string& expected,
                   const std::string& found) const {
    return InputError({file_, 0, 0, std::string(key)}, expected_found(expected, found));
  }

  std::int64_t integer(std::string_view key, std::int64_t lo, std::int64_t hi,
                       std::optional<std::int64_t> fallback = std::nullopt) const {
    const json* value = find(key);
    const std::string expected = fmt::format("an integer in [{}, {}]", lo, hi);
    if (value == nullptr) {
      if (fallback)
        return *fallback;
      throw error(key, expected, "none");
    }
    const bool fits = value->is_number_integer() &&
                      (!value->is_number_unsigned() ||
                       value->get<std::uint64_t>() <=
                           static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()));
    if (!fits || value->get<std::int64_t>() < lo || value->get<std::int64_t>() > hi)
      throw error(key, expected, shown(*value));
    return value->get<std::int64_t>();
  }

  bool boolean(std::string_view key, bool fallback) const {
    const json* value = find(key);
    if (value == nullptr)
      return fallback;
    if (!value->is_boolean())
      throw error(key, "true or false", shown(*value));
    return value->get<bool>();
  }

  const std::string& file() const { return file_; }

 private:
  const json& root_;
  std::string file_;
};

std::vector<std::string> model_type_names() {
  return {std::begin(k_hf_model_types), std::end(k_hf_model_types)};
}

DType read_dtype(const Keys& keys) {
  // transformers 5 writes "dtype"; 4 writes "torch_dtype".
  const char* key = keys.find("torch_dtype") != nullptr ? "torch_dtype" : "dtype";
  const json* value = keys.find(key);
  if (value == nullptr)
    return DType::bf16;
  static const std::array<std::pair<const char*, DType>, 3> names = {
      {{"float32", DType::fp32}, {"bfloat16", DType::bf16}, {"float16", DType::fp16}}};
  for (const auto& [name, dtype] : names) {
    if (*value == name)
      return dtype;
  }
  throw keys.error(key, "one of float32, bfloat16, float16", shown(*value));
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

// config.json's key for each field find_shape_problem reports (`type`: the model_type).
std::string hf_key(const std::string& field, const std::string& type) {
  if (type == "qwen3_moe" && field == "experts")
    return "num_experts";
  if (type == "qwen3_moe" && field == "ffn_dim")
    return "moe_intermediate_size";
  static const std::array<std::pair<const char*, const char*>, 9> names = {
      {{"d_model", "hidden_size"},
       {"n_heads", "num_attention_heads"},
       {"n_kv_heads", "num_key_value_heads"},
       {"head_dim", "head_dim"},
       {"ffn_dim", "intermediate_size"},
       {"vocab", "vocab_size"},
       {"depth.prelude", "num_hidden_layers"},
       {"experts", "num_local_experts"},
       {"experts_per_token", "num_experts_per_tok"}}};
  for (const auto& [ours, theirs] : names) {
    if (field == ours)
      return theirs;
  }
  return field;
}

// Qwen3-MoE's experts: each the width moe_intermediate_size (intermediate_size is a dense layer's,
// which a model with every layer a mixture has none of). Dense layers among the mixtures
// (decoder_sparse_step above 1, mlp_only_layers) are not a shape exitsim has: refused.
void read_qwen3_moe(const Keys& keys, ModelShape& shape) {
  shape.experts = keys.integer("num_experts", 1, k_max_experts);
  shape.experts_per_token = keys.integer("num_experts_per_tok", 1, shape.experts);
  shape.ffn_dim = keys.integer("moe_intermediate_size", 1, k_max_intermediate);
  if (const json* step = keys.find("decoder_sparse_step");
      step != nullptr && !(step->is_number_integer() && step->get<std::int64_t>() == 1)) {
    throw keys.error("decoder_sparse_step",
                     "1 (every layer a mixture; dense layers between mixtures are not modelled)",
                     shown(*step));
  }
  if (const json* dense = keys.find("mlp_only_layers");
      dense != nullptr && !(dense->is_array() && dense->empty())) {
    throw keys.error("mlp_only_layers",
                     "[] (every layer a mixture; dense layers among them are not modelled)",
                     shown(*dense));
  }
}

}  // namespace

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
  const bool gemma = type == "gemma" || type == "gemma2";

  if (const json* quantization = keys.find("quantization_config"); quantization != nullptr) {
    throw keys.error("quantization_config",
                     "none (a quantized checkpoint's weights are not torch_dtype's; give "
                     "model.dtype and the shape keys instead)",
                     quantization->is_object() ? "an object" : shown(*quantization));
  }

  ModelShape shape;
  shape.name = model_name(keys);
  shape.d_model = keys.integer("hidden_size", 1, k_max_hidden);
  shape.n_heads = keys.integer("num_attention_heads", 1, k_max_heads);
  shape.n_kv_heads = keys.integer("num_key_value_heads", 1, k_max_heads, shape.n_heads);
  if (gemma) {
    shape.head_dim = keys.integer("head_dim", 1, k_max_head_dim);
  } else {
    if (keys.find("head_dim") == nullptr && shape.d_model % shape.n_heads != 0) {
      throw keys.error("head_dim",
                       fmt::format("a value, as hidden_size ({}) is not a multiple of "
                                   "num_attention_heads ({})",
                                   shape.d_model, shape.n_heads),
                       "none");
    }
    shape.head_dim = keys.integer("head_dim", 1, k_max_head_dim, shape.d_model / shape.n_heads);
  }
  shape.ffn_dim = keys.integer("intermediate_size", 1, k_max_intermediate);
  shape.vocab = keys.integer("vocab_size", 1, k_max_vocab);
  shape.depth =
      DepthStructure::plain(static_cast<int>(keys.integer("num_hidden_layers", 1, k_max_layers)));
  shape.max_context = keys.integer("max_position_embeddings", 1, k_max_context);
  shape.tied_embeddings = keys.boolean("tie_word_embeddings", gemma);
  shape.dtype = read_dtype(keys);
  shape.mlp = MlpKind::gated;
  if (type == "mixtral") {
    shape.experts = keys.integer("num_local_experts", 1, k_max_experts);
    shape.experts_per_token = keys.integer("num_experts_per_tok", 1, shape.experts);
  }
  if (type == "qwen3_moe")
    read_qwen3_moe(keys, shape);
  if (const std::optional<ShapeProblem> problem = find_shape_problem(shape))
    throw InputError({file, 0, 0, hf_key(problem->field, type)}, problem->message);
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
