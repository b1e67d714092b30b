// The BPE model of a tokenizer.json (vocab, merges, added tokens) and the whole file's parse.
#include "tokenizer_json.hpp"

#include <algorithm>
#include <unordered_map>

#include "byte_alphabet.hpp"
#include "exitsim/core/json_input.hpp"
#include "json_reader.hpp"

namespace exitsim::text {
namespace {

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
    model.added.add(content, id);
  }
}

JsonInput tokenizer_input(const std::string& file) {
  JsonInput input{file, "a tokenizer.json (JSON)", k_max_tokenizer_bytes};
  input.file_kind = "tokenizer file";
  return input;
}

// A real tokenizer numbers its tokens 0, 1, ... without gaps: its ids are below its count of
// vocab entries and added tokens. Holding ids near that keeps the id-indexed tables as large as
// the file's own entries (an id of 300,000,000 in a 4 kB file took 9.2 GB).
std::int64_t id_limit_of(const json& root) {
  std::int64_t entries = 0;
  if (const auto model = root.find("model"); model != root.end() && model->is_object()) {
    if (const auto vocab = model->find("vocab"); vocab != model->end() && vocab->is_object())
      entries += static_cast<std::int64_t>(vocab->size());
  }
  if (const auto added = root.find("added_tokens"); added != root.end() && added->is_array())
    entries += static_cast<std::int64_t>(added->size());
  return entries;
}

std::unique_ptr<const BpeModel> model_of(const json& root, const std::string& file) {
  Reader reader(file);
  if (!root.is_object())
    reader.fail("", "a tokenizer.json object", shown(root));
  reader.set_id_limit(id_limit_of(root));
  auto model = std::make_unique<BpeModel>();
  model->file = file;
  read_model(reader, root, *model);
  read_added_tokens(reader, root, *model);
  read_normalizer(reader, root, *model);
  read_pre_tokenizer(reader, root, *model);
  read_post_processor(reader, root, *model);
  return model;
}

}  // namespace

std::unique_ptr<const BpeModel> parse_tokenizer_json(std::string_view text,
                                                     const std::string& file) {
  return model_of(parse_json(text, tokenizer_input(file)), file);
}

std::unique_ptr<const BpeModel> read_tokenizer_json(const std::string& path) {
  return model_of(read_json_file(tokenizer_input(path)), path);
}

}  // namespace exitsim::text
