#include "exitsim/engine/hidden_states.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>
#include <utility>

namespace exitsim::engine {

HiddenStates::HiddenStates(std::int64_t width) : width_(width) {
  if (width <= 0)
    throw std::invalid_argument(fmt::format("hidden states of width {}", width));
}

StateSlot HiddenStates::acquire() {
  if (free_.empty()) {
    const std::int64_t old = capacity();
    const std::int64_t grown = std::max<std::int64_t>(16, 2 * old);
    grow(grown);
    held_.resize(static_cast<std::size_t>(grown), 0);
    for (std::int64_t s = grown - 1; s >= old; --s)
      free_.push_back(static_cast<StateSlot>(s));
  }
  const StateSlot slot = free_.back();
  free_.pop_back();
  held_[static_cast<std::size_t>(slot)] = 1;
  return slot;
}

void HiddenStates::release(StateSlot slot) {
  if (slot < 0 || slot >= capacity() || held_[static_cast<std::size_t>(slot)] == 0)
    throw std::logic_error(fmt::format("releasing hidden-state slot {}, which is not held", slot));
  held_[static_cast<std::size_t>(slot)] = 0;
  // Keep the free list descending so that acquire hands out the lowest slot: rows acquired
  // together then tend to be adjacent.
  free_.insert(std::upper_bound(free_.begin(), free_.end(), slot, std::greater<>()), slot);
}

void HiddenStates::check_held(std::span<const StateSlot> slots, std::int64_t rows) const {
  if (rows >= 0 && rows != static_cast<std::int64_t>(slots.size())) {
    throw std::logic_error(fmt::format("{} hidden-state rows for {} slots", rows, slots.size()));
  }
  for (const StateSlot slot : slots) {
    if (slot < 0 || slot >= capacity() || held_[static_cast<std::size_t>(slot)] == 0)
      throw std::logic_error(fmt::format("hidden-state slot {} is not held", slot));
  }
}

HeldStates::HeldStates(HiddenStates& store, std::size_t count) : store_(&store) {
  slots_.reserve(count);
  for (std::size_t i = 0; i < count; ++i)
    slots_.push_back(store.acquire());
}

HeldStates::HeldStates(HeldStates&& other) noexcept
    : store_(std::exchange(other.store_, nullptr)), slots_(std::move(other.slots_)) {
  other.slots_.clear();
}

HeldStates& HeldStates::operator=(HeldStates&& other) noexcept {
  if (this != &other) {
    reset();
    store_ = std::exchange(other.store_, nullptr);
    slots_ = std::move(other.slots_);
    other.slots_.clear();
  }
  return *this;
}

void HeldStates::reset() {
  if (store_ != nullptr) {
    for (const StateSlot slot : slots_)
      store_->release(slot);
  }
  slots_.clear();
  store_ = nullptr;
}

Matrix HostStates::read(std::span<const StateSlot> slots) const {
  check_held(slots);
  Matrix out(static_cast<Eigen::Index>(slots.size()), width());
  for (std::size_t i = 0; i < slots.size(); ++i)
    out.row(static_cast<Eigen::Index>(i)) = rows_.row(slots[i]);
  return out;
}

void HostStates::write(std::span<const StateSlot> slots, const Matrix& rows) {
  check_held(slots, rows.rows());
  if (rows.cols() != width())
    throw std::logic_error(
        fmt::format("rows of width {} for states of width {}", rows.cols(), width()));
  for (std::size_t i = 0; i < slots.size(); ++i)
    rows_.row(slots[i]) = rows.row(static_cast<Eigen::Index>(i));
}

void HostStates::copy(std::span<const StateSlot> from, std::span<const StateSlot> to) {
  check_held(from);
  check_held(to, static_cast<std::int64_t>(from.size()));
  for (std::size_t i = 0; i < from.size(); ++i)
    rows_.row(to[i]) = rows_.row(from[i]);
}

void HostStates::grow(std::int64_t capacity) {
  rows_.conservativeResize(capacity, width());
}

}  // namespace exitsim::engine
