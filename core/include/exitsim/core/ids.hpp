#pragma once

#include <compare>
#include <cstdint>
#include <functional>

namespace exitsim {

// A typed integer id: a RequestId cannot be passed where a TokenId is expected.
template <typename Tag>
struct StrongId {
  std::uint64_t value = 0;

  constexpr StrongId() = default;
  constexpr explicit StrongId(std::uint64_t v) : value(v) {}
  friend constexpr auto operator<=>(StrongId, StrongId) = default;
};

using RequestId = StrongId<struct RequestIdTag>;
// A generated token is identified by its request and its output position; TokenId numbers tokens
// globally in emission order where a flat key is needed (token traces, timelines).
using TokenId = StrongId<struct TokenIdTag>;
using ReplicaId = StrongId<struct ReplicaIdTag>;

}  // namespace exitsim

template <typename Tag>
struct std::hash<exitsim::StrongId<Tag>> {
  std::size_t operator()(exitsim::StrongId<Tag> id) const noexcept {
    return std::hash<std::uint64_t>{}(id.value);
  }
};
