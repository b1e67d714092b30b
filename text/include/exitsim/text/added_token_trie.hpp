#pragma once

// The added tokens of a tokenizer (Llama 3's <|begin_of_text|> and 255 more) as a byte trie, for
// splitting text on them: at each position, the longest added token starting there. A walk
// visits at most one node per byte of the longest added token, whatever the number of tokens:
// comparing the text with every token at every position made a 2 MB message against 5,000
// added tokens take 18-32 s.

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

namespace exitsim::text {

class AddedTokenTrie {
 public:
  struct Match {
    std::int32_t id = 0;
    std::size_t length = 0;  // bytes of text the token spans
  };

  AddedTokenTrie();

  // Adds a token (non-empty content). Of two tokens with the same content the first added is
  // the one matched, as when the tokens were tried in file order.
  void add(std::string_view content, std::int32_t id);

  // The longest token that `text` holds at `at`, or none. When `visited` is given, the nodes
  // the walk visited are added to it (for tests of the walk's cost).
  std::optional<Match> longest_at(std::string_view text, std::size_t at,
                                  std::size_t* visited = nullptr) const;

  // Whether some token starts with the byte: most text positions skip the walk.
  bool starts_with(unsigned char byte) const { return root_children_[byte] != k_none; }

  std::size_t nodes() const { return nodes_.size(); }

 private:
  static constexpr std::int32_t k_none = -1;
  struct Node {
    std::int32_t id = k_none;  // the token ending here, if any
    // Children by byte, sorted: a node past the first byte has few (Llama 3's "<|" has ~20).
    std::vector<std::pair<unsigned char, std::int32_t>> children;
  };
  std::int32_t child(std::int32_t node, unsigned char byte) const;
  std::int32_t add_child(std::int32_t node, unsigned char byte);

  std::vector<Node> nodes_;  // nodes_[0] is the root
  std::array<std::int32_t, 256> root_children_{};
};

}  // namespace exitsim::text
