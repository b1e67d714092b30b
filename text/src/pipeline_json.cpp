// The text pipeline around the BPE model: normalizer, pre-tokenizer and post-processor.
#include <unicode/normalizer2.h>
#include <unicode/regex.h>
#include <unicode/utypes.h>

#include "json_reader.hpp"
#include "tokenizer_json.hpp"

namespace exitsim::text {
namespace {

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

void read_pre_tokenizer_step(const Reader& reader, const json& step, const std::string& key,
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
      read_pre_tokenizer_step(reader, steps[i], fmt::format("{}.pretokenizers[{}]", key, i), model);
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

void read_post_processor_step(const Reader& reader, const json& processor, const std::string& key,
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
      read_post_processor_step(reader, steps[i], fmt::format("{}.processors[{}]", key, i), model);
  } else if (type == "TemplateProcessing") {
    read_template(reader, processor, key, model);
  } else if (type != "ByteLevel") {  // ByteLevel only trims offsets, which are not kept here
    reader.fail(key + ".type", expected, shown(json(type)));
  }
}

}  // namespace

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

void read_pre_tokenizer(const Reader& reader, const json& root, BpeModel& model) {
  if (const auto it = root.find("pre_tokenizer"); it != root.end())
    read_pre_tokenizer_step(reader, *it, "pre_tokenizer", model);
}

void read_post_processor(const Reader& reader, const json& root, BpeModel& model) {
  if (const auto it = root.find("post_processor"); it != root.end())
    read_post_processor_step(reader, *it, "post_processor", model);
}

}  // namespace exitsim::text
