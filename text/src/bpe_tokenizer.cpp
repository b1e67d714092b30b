#include "exitsim/text/bpe_tokenizer.hpp"

#include <fmt/format.h>

#include <limits>
#include <queue>
#include <stdexcept>

#include "bpe_model.hpp"
#include "byte_alphabet.hpp"
#include "exitsim/core/error.hpp"
#include "pre_tokenize.hpp"
#include "tokenizer_json.hpp"

namespace exitsim::text {
namespace {

// Merges one piece's byte symbols: while some adjacent pair has a merge, the lowest-ranked one
// (the leftmost of equals) joins. The symbols form a linked list and the candidate pairs a
// min-heap, so a long piece (a run of 100 000 spaces or '=') costs O(n log n), not O(n^2).
void merge_piece(const BpeModel& model, const std::string& piece, std::vector<std::int32_t>& out) {
  if (model.ignore_merges) {
    std::string spelled;
    for (const char c : piece)
      spelled += byte_symbol_utf8(static_cast<unsigned char>(c));
    if (const auto it = model.token_ids.find(spelled); it != model.token_ids.end()) {
      out.push_back(it->second);
      return;
    }
  }
  constexpr std::size_t k_none = std::numeric_limits<std::size_t>::max();
  struct Symbol {
    std::int32_t id = 0;
    std::size_t prev = k_none;
    std::size_t next = k_none;
    bool alive = true;
  };
  // A pair that could merge when it was pushed; stale once either side has changed.
  struct Candidate {
    std::int32_t rank = 0;
    std::size_t left = 0;
    std::size_t right = 0;
    std::int32_t left_id = 0;
    std::int32_t right_id = 0;
    std::int32_t merged = 0;
    // std::priority_queue keeps the largest first: invert to pop the lowest rank, then leftmost.
    bool operator<(const Candidate& other) const {
      return rank != other.rank ? rank > other.rank : left > other.left;
    }
  };
  std::vector<Symbol> symbols(piece.size());
  for (std::size_t i = 0; i < piece.size(); ++i) {
    symbols[i].id = model.byte_ids[static_cast<unsigned char>(piece[i])];
    symbols[i].prev = i == 0 ? k_none : i - 1;
    symbols[i].next = i + 1 == piece.size() ? k_none : i + 1;
  }
  std::priority_queue<Candidate> candidates;
  const auto offer = [&](std::size_t left, std::size_t right) {
    if (left == k_none || right == k_none)
      return;
    const auto it = model.merges.find(pair_key(symbols[left].id, symbols[right].id));
    if (it != model.merges.end()) {
      candidates.push(Candidate{it->second.rank, left, right, symbols[left].id, symbols[right].id,
                                it->second.merged});
    }
  };
  for (std::size_t i = 0; i + 1 < symbols.size(); ++i)
    offer(i, i + 1);
  while (!candidates.empty()) {
    const Candidate c = candidates.top();
    candidates.pop();
    Symbol& left = symbols[c.left];
    Symbol& right = symbols[c.right];
    if (!left.alive || !right.alive || left.next != c.right || left.id != c.left_id ||
        right.id != c.right_id)
      continue;
    left.id = c.merged;
    right.alive = false;
    left.next = right.next;
    if (right.next != k_none)
      symbols[right.next].prev = c.left;
    offer(left.prev, c.left);
    offer(c.left, left.next);
  }
  for (const Symbol& symbol : symbols) {
    if (symbol.alive)
      out.push_back(symbol.id);
  }
}

}  // namespace

BpeTokenizer::BpeTokenizer(std::unique_ptr<const BpeModel> model) : model_(std::move(model)) {}
BpeTokenizer::BpeTokenizer(BpeTokenizer&&) noexcept = default;
BpeTokenizer& BpeTokenizer::operator=(BpeTokenizer&&) noexcept = default;
BpeTokenizer::~BpeTokenizer() = default;

BpeTokenizer BpeTokenizer::from_file(const std::filesystem::path& path) {
  return BpeTokenizer(read_tokenizer_json(path.string()));
}

BpeTokenizer BpeTokenizer::from_json_text(std::string_view json_text, const std::string& file) {
  return BpeTokenizer(parse_tokenizer_json(json_text, file));
}

std::vector<std::int32_t> BpeTokenizer::encode(std::string_view text) const {
  std::vector<std::int32_t> ids;
  const auto encode_plain = [&](std::string_view plain) {
    for (const std::string& piece : pre_tokenize(*model_, plain))
      merge_piece(*model_, piece, ids);
  };
  std::size_t plain_start = 0;
  std::size_t at = 0;
  while (at < text.size()) {
    const std::optional<AddedTokenTrie::Match> added =
        model_->added.starts_with(static_cast<unsigned char>(text[at]))
            ? model_->added.longest_at(text, at)
            : std::nullopt;
    if (!added) {
      ++at;
      continue;
    }
    encode_plain(text.substr(plain_start, at - plain_start));
    ids.push_back(added->id);
    at += added->length;
    plain_start = at;
  }
  encode_plain(text.substr(plain_start));
  return ids;
}

std::vector<std::int32_t> BpeTokenizer::encode_with_template(std::string_view text) const {
  std::vector<std::int32_t> ids = model_->template_before;
  const std::vector<std::int32_t> own = encode(text);
  ids.insert(ids.end(), own.begin(), own.end());
  ids.insert(ids.end(), model_->template_after.begin(), model_->template_after.end());
  return ids;
}

std::string BpeTokenizer::decode(std::span<const std::int32_t> ids) const {
  std::string text;
  for (const std::int32_t id : ids) {
    if (id < 0)
      throw std::invalid_argument(fmt::format("BpeTokenizer::decode: negative token id {}", id));
    const auto index = static_cast<std::size_t>(id);
    if (index >= model_->tokens.size())
      continue;
    const std::string& token = model_->tokens[index];
    if (model_->is_added[index]) {
      text += token;
      continue;
    }
    // Vocabulary tokens are valid UTF-8 (they came from JSON); a code point outside the byte
    // alphabet cannot come from any byte and is kept as written.
    const std::optional<std::u32string> symbols = decode_utf8(token);
    if (!symbols) {
      text += token;
      continue;
    }
    for (const char32_t symbol : *symbols) {
      if (const std::optional<unsigned char> byte = symbol_byte(symbol))
        text.push_back(static_cast<char>(*byte));
      else
        append_utf8(text, symbol);
    }
  }
  return text;
}

std::optional<std::int32_t> BpeTokenizer::token_id(std::string_view token) const {
  const auto it = model_->token_ids.find(std::string(token));
  if (it == model_->token_ids.end())
    return std::nullopt;
  return it->second;
}

std::int64_t BpeTokenizer::id_limit() const {
  return static_cast<std::int64_t>(model_->tokens.size());
}

}  // namespace exitsim::text
