#include "tokenizer_json.hpp"

#include <fmt/format.h>
#include <unicode/normalizer2.h>
#include <unicode/regex.h>
#include <unicode/utypes.h>

#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>

#include "byte_alphabet.hpp"
#include "exitsim/core/error.hpp"

namespace exitsim::text {
namespace {

using nlohmann::json;

constexpr std::size_t k_max_shown_chars = 60;

// A JSON value as an error shows it: short values whole, long ones cut.
std::string shown(const json& value) {
  std::string text = value.dump(-1, ' ', false, json::error_handler_t::replace);
  if (text.size() > k_max_shown_chars)
    text = text.substr(0, k_max_shown_chars) + "...";
  return text;
}

class Reader {
 public:
  explicit Reader(const std::string& file) : file_(file) {}

  [[noreturn]] void fail(const std::string& key, const std::string& expected,
                         const std::string& found) const {
    throw InputError(SourceLocation{file_, 0, 0, key}, expected_found(expected, found));
  }

  const json& member(const json& object, const std::string& prefix, const char* key,
                     const char* expected) const {
    const auto it = object.find(key);
    if (it == object.end())
      fail(join(prefix, key), expected, "none");
    return *it;
  }

  const json& object_member(const json& object, const std::string& prefix, const char* key) const {
    const json& value = member(object, prefix, key, "an object");
    if (!value.is_object())
      fail(join(prefix, key), "an object", shown(value));
    return value;
  }

  std::string string_member(const json& object, const std::string& prefix, const char* key,
                            const char* expected) const {
    const json& value = member(object, prefix, key, expected);
    if (!value.is_string())
      fail(join(prefix, key), expected, shown(value));
    return value.get<std::string>();
  }

  bool bool_member(const json& object, const std::string& prefix, const char* key,
                   bool fallback) const {
    const auto it = object.find(key);
    if (it == object.end() || it->is_null())
      return fallback;
    if (!it->is_boolean())
      fail(join(prefix, key), "true or false", shown(*it));
    return it->get<bool>();
  }

  std::int32_t id_value(const json& value, const std::string& key) const {
    const std::string expected =
        fmt::format("a token id in [0, {}]", std::numeric_limits<std::int32_t>::max() - 1);
    if (!value.is_number_integer())
      fail(key, expected, shown(value));
    if (value.is_number_unsigned()
            ? value.get<std::uint64_t>() >= std::numeric_limits<std::int32_t>::max()
            : value.get<std::int64_t>() < 0 ||
                  value.get<std::int64_t>() >= std::numeric_limits<std::int32_t>::max())
      fail(key, expected, shown(value));
    return static_cast<std::int32_t>(value.get<std::int64_t>());
  }

  static std::string join(const std::string& prefix, const char* key) {
    return prefix.empty() ? std::string(key) : prefix + "." + key;
  }

 private:
  const std::string& file_;
};

std::string quoted_token(const std::string& token) {
  return json(token).dump(-1, ' ', false, json::error_handler_t::replace);
}

void record_token(BpeModel& model, const std::string& token, std::int32_t id, bool added) {
  const auto index = static_cast<std::size_t>(id);
  if (index >= model.tokens.size()) {
    model.tokens.resize(index + 1);
    model.is_added.resize(index + 1, false);
  }
  model.tokens[index] = token;
  model.is_added[index] = added;
}

void read_vocab(const Reader& reader, const json& bpe, BpeModel& model) {
  const json& vocab = reader.object_member(bpe, "model", "vocab");
  if (vocab.empty())
    reader.fail("model.vocab", "a token -> id object with at least the 256 byte symbols", "{}");
  std::unordered_map<std::int32_t, std::string> owner;
  for (const auto& [token, value] : vocab.items()) {
    const std::string key = "model.vocab." + quoted_token(token);
    const std::int32_t id = reader.id_value(value, key);
    if (const auto [it, fresh] = owner.emplace(id, token); !fresh)
      reader.fail(key, "an id no other token has",
                  fmt::format("{} (also {})", id, quoted_token(it->second)));
    model.token_ids.emplace(token, id);
    record_token(model, token, id, false);
  }
  for (unsigned b = 0; b < 256; ++b) {
    const std::string& symbol = byte_symbol_utf8(static_cast<unsigned char>(b));
    const auto it = model.token_ids.find(symbol);
    if (it == model.token_ids.end()) {
      reader.fail("model.vocab",
                  fmt::format("the byte-level symbol {} for byte 0x{:02X} (a byte-level BPE "
                              "vocabulary spells every byte)",
                              quoted_token(symbol), b),
                  "none");
    }
    model.byte_ids[b] = it->second;
  }
}

// A merge as its two halves: "a b" (older files) or ["a", "b"] (tokenizers >= 0.20).
std::pair<std::string, std::string> merge_halves(const Reader& reader, const json& merge,
                                                 const std::string& key) {
  constexpr const char* expected = "a merge: \"left right\" or [\"left\", \"right\"]";
  if (merge.is_string()) {
    const std::string text = merge.get<std::string>();
    const std::size_t space = text.find(' ');
    if (space == std::string::npos || space == 0 || space + 1 == text.size() ||
        text.find(' ', space + 1) != std::string::npos)
      reader.fail(key, expected, shown(merge));
    return {text.substr(0, space), text.substr(space + 1)};
  }
  if (merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string())
    return {merge[0].get<std::string>(), merge[1].get<std::string>()};
  reader.fail(key, expected, shown(merge));
}

void read_merges(const Reader& reader, const json& bpe, BpeModel& model) {
  const json& merges = reader.member(bpe, "model", "merges", "an array of merges");
  if (!merges.is_array())
    reader.fail("model.merges", "an array of merges", shown(merges));
  const auto id_of = [&](const std::string& token, const std::string& key) {
    const auto it = model.token_ids.find(token);
    if (it == model.token_ids.end())
      reader.fail(key, "tokens of model.vocab", quoted_token(token) + ", which is not in it");
    return it->second;
  };
  for (std::size_t rank = 0; rank < merges.size(); ++rank) {
    const std::string key = fmt::format("model.merges[{}]", rank);
    const auto [left, right] = merge_halves(reader, merges[rank], key);
    const std::int32_t left_id = id_of(left, key);
    const std::int32_t right_id = id_of(right, key);
    const std::int32_t merged = id_of(left + right, key);
    // A repeated pair keeps its first, lower rank: that is the one that ever applies.
    model.merges.emplace(pair_key(left_id, right_id),
                         MergeRule{static_cast<std::int32_t>(rank), merged});
  }
}

void read_model(const Reader& reader, const json& root, BpeModel& model) {
  const json& bpe = reader.object_member(root, "", "model");
  if (const auto type = bpe.find("type"); type != bpe.end() && *type != "BPE")
    reader.fail("model.type", "\"BPE\" (the only model read here)", shown(*type));
  if (reader.bool_member(bpe, "model", "byte_fallback", false))
    reader.fail("model.byte_fallback", "false (byte-level BPE needs no fallback)", "true");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    const auto it = bpe.find(key);
    if (it != bpe.end() && !it->is_null() && *it != "")
      reader.fail(Reader::join("model", key), "null (byte-level BPE has no word markers)",
                  shown(*it));
  }
  if (const auto it = bpe.find("dropout"); it != bpe.end() && !it->is_null() && *it != 0.0)
    reader.fail("model.dropout", "null (encoding is deterministic here)", shown(*it));
  model.ignore_merges = reader.bool_member(bpe, "model", "ignore_merges", false);
  read_vocab(reader, bpe, model);
  read_merges(reader, bpe, model);
}

void read_added_tokens(const Reader& reader, const json& root, BpeModel& model) {
  const auto it = root.find("added_tokens");
  if (it == root.end() || it->is_null())
    return;
  if (!it->is_array())
    reader.fail("added_tokens", "an array of {\"id\", \"content\"} objects", shown(*it));
  for (std::size_t i = 0; i < it->size(); ++i) {
    const std::string prefix = fmt::format("added_tokens[{}]", i);
    const json& entry = (*it)[i];
    if (!entry.is_object())
      reader.fail(prefix, "an object with \"id\" and \"content\"", shown(entry));
    const std::int32_t id =
        reader.id_value(reader.member(entry, prefix, "id", "a token id"), prefix + ".id");
    std::string content = reader.string_member(entry, prefix, "content", "the token's text");
    if (content.empty())
      reader.fail(prefix + ".content", "the token's text", "\"\"");
    record_token(model, content, id, true);
    model.token_ids[content] = id;
    model.starts_added[static_cast<unsigned char>(content.front())] = true;
    model.added.push_back(AddedToken{std::move(content), id});
  }
  std::stable_sort(model.added.begin(), model.added.end(), [](const auto& a, const auto& b) {
    return a.content.size() > b.content.size();
  });
}

std::shared_ptr<const icu::RegexPattern> compile(const Reader& reader, const std::string& pattern,
                                                 bool literal, const std::string& key) {
  UErrorCode status = U_ZERO_ERROR;
  UParseError where{};
  std::shared_ptr<const icu::RegexPattern> compiled(icu::RegexPattern::compile(
      icu::UnicodeString::fromUTF8(pattern), literal ? UREGEX_LITERAL : 0, where, status));
  if (U_FAILURE(status) || compiled == nullptr) {
    reader.fail(key, "a regular expression",
                fmt::format("{} ({} at offset {})", shown(json(pattern)), u_errorName(status),
                            where.offset));
  }
  return compiled;
}

void read_pre_tokenizer(const Reader& reader, const json& step, const std::string& key,
                        BpeModel& model) {
  if (step.is_null())
    return;
  if (!step.is_object())
    reader.fail(key, "an object with a \"type\"", shown(step));
  const std::string type =
      reader.string_member(step, key, "type", "\"ByteLevel\", \"Split\" or \"Sequence\"");
  if (type == "Sequence") {
    const json& steps = reader.member(step, key, "pretokenizers", "an array of pre-tokenizers");
    if (!steps.is_array())
      reader.fail(key + ".pretokenizers", "an array of pre-tokenizers", shown(steps));
    for (std::size_t i = 0; i < steps.size(); ++i)
      read_pre_tokenizer(reader, steps[i], fmt::format("{}.pretokenizers[{}]", key, i), model);
  } else if (type == "ByteLevel") {
    PreTokenizerStep parsed;
    parsed.add_prefix_space = reader.bool_member(step, key, "add_prefix_space", false);
    if (reader.bool_member(step, key, "use_regex", true))
      parsed.pattern = compile(reader, std::string(k_gpt2_split_pattern), false, key);
    model.pre_tokenizer.push_back(std::move(parsed));
  } else if (type == "Split") {
    const json& pattern = reader.object_member(step, key, "pattern");
    const bool literal = pattern.contains("String");
    const char* kind = literal ? "String" : "Regex";
    const std::string text = reader.string_member(pattern, key + ".pattern", kind,
                                                  "a {\"Regex\"} or {\"String\"} pattern");
    if (const std::string behavior = reader.string_member(step, key, "behavior", "\"Isolated\"");
        behavior != "Isolated")
      reader.fail(key + ".behavior", "\"Isolated\" (the only split behaviour read here)",
                  shown(json(behavior)));
    if (reader.bool_member(step, key, "invert", false))
      reader.fail(key + ".invert", "false", "true");
    model.pre_tokenizer.push_back(
        PreTokenizerStep{compile(reader, text, literal, key + ".pattern." + kind), false});
  } else {
    reader.fail(key + ".type", "\"ByteLevel\", \"Split\" or \"Sequence\"", shown(json(type)));
  }
}

void read_normalizer(const Reader& reader, const json& root, BpeModel& model) {
  const auto it = root.find("normalizer");
  if (it == root.end() || it->is_null())
    return;
  if (!it->is_object() || it->value("type", json()) != "NFC")
    reader.fail("normalizer", "null or {\"type\": \"NFC\"}", shown(*it));
  UErrorCode status = U_ZERO_ERROR;
  model.nfc = icu::Normalizer2::getNFCInstance(status);
  if (U_FAILURE(status))
    reader.fail("normalizer", "an NFC normalizer ICU can load", u_errorName(status));
}

// The ids a template's {"SpecialToken": {"id": NAME}} item stands for: the post-processor's
// special_tokens[NAME].ids, or else the token NAME itself.
std::vector<std::int32_t> special_token_ids(const Reader& reader, const json& processor,
                                            const std::string& name, const std::string& key,
                                            const BpeModel& model) {
  std::vector<std::int32_t> ids;
  const auto specials = processor.find("special_tokens");
  if (specials != processor.end() && specials->is_object() && specials->contains(name)) {
    const std::string ids_key = key + ".special_tokens." + quoted_token(name) + ".ids";
    const json& entry = (*specials)[name];
    const auto listed = entry.is_object() ? entry.find("ids") : entry.end();
    if (!entry.is_object() || listed == entry.end() || !listed->is_array())
      reader.fail(ids_key, "an array of token ids", entry.is_object() ? "none" : shown(entry));
    for (std::size_t i = 0; i < listed->size(); ++i) {
      const std::string id_key = fmt::format("{}[{}]", ids_key, i);
      const std::int32_t id = reader.id_value((*listed)[i], id_key);
      // Only ids with a token decode, and id_limit() must cover every id encoding gives.
      const auto index = static_cast<std::size_t>(id);
      if (index >= model.tokens.size() || model.tokens[index].empty())
        reader.fail(id_key, "the id of a vocabulary or added token", std::to_string(id));
      ids.push_back(id);
    }
    return ids;
  }
  const auto it = model.token_ids.find(name);
  if (it == model.token_ids.end())
    reader.fail(key + ".single", "special tokens the vocabulary has", quoted_token(name));
  ids.push_back(it->second);
  return ids;
}

// TemplateProcessing's "single": special tokens around one {"Sequence": {"id": "A"}}.
void read_template(const Reader& reader, const json& processor, const std::string& key,
                   BpeModel& model) {
  const json& single = reader.member(processor, key, "single", "an array of template items");
  if (!single.is_array())
    reader.fail(key + ".single", "an array of template items", shown(single));
  bool sequence_seen = false;
  for (std::size_t i = 0; i < single.size(); ++i) {
    const std::string item_key = fmt::format("{}.single[{}]", key, i);
    const json& item = single[i];
    constexpr const char* expected = R"({"SpecialToken": {"id": ...}} or {"Sequence": ...})";
    if (item.is_object() && item.contains("Sequence") && !sequence_seen) {
      sequence_seen = true;
      continue;
    }
    if (!item.is_object() || !item.contains("SpecialToken") || !item["SpecialToken"].is_object())
      reader.fail(item_key, expected, shown(item));
    const std::string name =
        reader.string_member(item["SpecialToken"], item_key + ".SpecialToken", "id", "a token");
    for (const std::int32_t id : special_token_ids(reader, processor, name, key, model))
      (sequence_seen ? model.template_after : model.template_before).push_back(id);
  }
  if (!sequence_seen)
    reader.fail(key + ".single", R"(one {"Sequence": ...} item for the text)", "none");
}

void read_post_processor(const Reader& reader, const json& processor, const std::string& key,
                         BpeModel& model) {
  if (processor.is_null())
    return;
  constexpr const char* expected = R"("ByteLevel", "TemplateProcessing" or "Sequence")";
  if (!processor.is_object())
    reader.fail(key, "an object with a \"type\"", shown(processor));
  const std::string type = reader.string_member(processor, key, "type", expected);
  if (type == "Sequence") {
    const json& steps = reader.member(processor, key, "processors", "an array of processors");
    if (!steps.is_array())
      reader.fail(key + ".processors", "an array of processors", shown(steps));
    for (std::size_t i = 0; i < steps.size(); ++i)
      read_post_processor(reader, steps[i], fmt::format("{}.processors[{}]", key, i), model);
  } else if (type == "TemplateProcessing") {
    read_template(reader, processor, key, model);
  } else if (type != "ByteLevel") {  // ByteLevel only trims offsets, which are not kept here
    reader.fail(key + ".type", expected, shown(json(type)));
  }
}

}  // namespace

std::unique_ptr<const BpeModel> parse_tokenizer_json(std::string_view text,
                                                     const std::string& file) {
  json root;
  try {
    root = json::parse(text.begin(), text.end());
  } catch (const json::parse_error& error) {
    const auto offset = std::min(static_cast<std::size_t>(error.byte), text.size());
    const auto line =
        1 + std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(offset), '\n');
    throw InputError(SourceLocation{file, line, 0, ""},
                     "expected a tokenizer.json (JSON), found: " + library_message(error));
  } catch (const json::exception& error) {  // 1e400: nlohmann's out_of_range
    throw InputError(
        SourceLocation{file, 0, 0, ""},
        expected_found("JSON numbers within the range of a double", library_message(error)));
  }
  const Reader reader(file);
  if (!root.is_object())
    reader.fail("", "a tokenizer.json object", shown(root));
  auto model = std::make_unique<BpeModel>();
  model->file = file;
  read_model(reader, root, *model);
  read_added_tokens(reader, root, *model);
  read_normalizer(reader, root, *model);
  if (const auto it = root.find("pre_tokenizer"); it != root.end())
    read_pre_tokenizer(reader, *it, "pre_tokenizer", *model);
  if (const auto it = root.find("post_processor"); it != root.end())
    read_post_processor(reader, *it, "post_processor", *model);
  return model;
}

}  // namespace exitsim::text
