#include "exitsim/text/added_token_trie.hpp"

#include <algorithm>

namespace exitsim::text {

AddedTokenTrie::AddedTokenTrie() : nodes_(1) {
  root_children_.fill(k_none);
}

std::int32_t AddedTokenTrie::child(std::int32_t node, unsigned char byte) const {
  if (node == 0)
    return root_children_[byte];
  const auto& children = nodes_[static_cast<std::size_t>(node)].children;
  const auto it =
      std::lower_bound(children.begin(), children.end(), byte,
                       [](const auto& entry, unsigned char b) { return entry.first < b; });
  return it != children.end() && it->first == byte ? it->second : k_none;
}

std::int32_t AddedTokenTrie::add_child(std::int32_t node, unsigned char byte) {
  if (const std::int32_t existing = child(node, byte); existing != k_none)
    return existing;
  const auto created = static_cast<std::int32_t>(nodes_.size());
  nodes_.emplace_back();
  if (node == 0) {
    root_children_[byte] = created;
  } else {
    auto& children = nodes_[static_cast<std::size_t>(node)].children;
    const auto it =
        std::lower_bound(children.begin(), children.end(), byte,
                         [](const auto& entry, unsigned char b) { return entry.first < b; });
    children.insert(it, {byte, created});
  }
  return created;
}

void AddedTokenTrie::add(std::string_view content, std::int32_t id) {
  std::int32_t node = 0;
  for (const char c : content)
    node = add_child(node, static_cast<unsigned char>(c));
  Node& end = nodes_[static_cast<std::size_t>(node)];
  if (node != 0 && end.id == k_none)
    end.id = id;
}

std::optional<AddedTokenTrie::Match> AddedTokenTrie::longest_at(std::string_view text,
                                                                std::size_t at,
                                                                std::size_t* visited) const {
  std::optional<Match> longest;
  std::int32_t node = 0;
  for (std::size_t i = at; i < text.size(); ++i) {
    node = child(node, static_cast<unsigned char>(text[i]));
    if (node == k_none)
      break;
    if (visited != nullptr)
      ++*visited;
    if (const std::int32_t id = nodes_[static_cast<std::size_t>(node)].id; id != k_none)
      longest = Match{id, i + 1 - at};
  }
  return longest;
}

}  // namespace exitsim::text
