#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "exitsim/engine/cpu_ops.hpp"

// Hidden states live where the backend computes on them: rows of a host matrix for the CPU
// backend, device memory for the GPU backend. The decoding loop never holds them itself; it holds
// slots — row numbers in its backend's store — and names the slots each layer call, head or
// router runs on. So a decode step moves hidden states between host and device only where a
// policy needs a decision on the host (logits, router scores), not at every layer.
namespace exitsim::engine {

using StateSlot = std::int32_t;

class HiddenStates {
 public:
  virtual ~HiddenStates() = default;
  HiddenStates(const HiddenStates&) = delete;
  HiddenStates& operator=(const HiddenStates&) = delete;

  std::int64_t width() const { return width_; }
  std::int64_t capacity() const { return static_cast<std::int64_t>(held_.size()); }
  std::int64_t in_use() const { return capacity() - static_cast<std::int64_t>(free_.size()); }

  // A free slot, the lowest first (the store grows by doubling when none is free). Its contents
  // are whatever the slot last held.
  StateSlot acquire();
  // Throws std::logic_error for a slot that is not held.
  void release(StateSlot slot);

  // Host copies of the slots' rows, in order (tests, observers); and rows written into slots.
  virtual Matrix read(std::span<const StateSlot> slots) const = 0;
  virtual void write(std::span<const StateSlot> slots, const Matrix& rows) = 0;
  // Row from[i] into row to[i], for every i; `to` holds no slot twice and none of `from`'s.
  virtual void copy(std::span<const StateSlot> from, std::span<const StateSlot> to) = 0;

  // Throws std::logic_error unless every slot is held and `rows` (when >= 0) matches their count:
  // a device backend cannot check indices once they are on the device.
  void check_held(std::span<const StateSlot> slots, std::int64_t rows = -1) const;

 protected:
  explicit HiddenStates(std::int64_t width);
  // Room for `capacity` rows, keeping the rows held so far.
  virtual void grow(std::int64_t capacity) = 0;

 private:
  std::int64_t width_;
  std::vector<StateSlot> free_;     // descending, so the lowest is at the back
  std::vector<std::uint8_t> held_;  // per slot
};

// Slots held for as long as this object lives: a pass's batch of rows, or one sequence's pending
// or in-flight state. Move-only; releasing is the destructor's.
class HeldStates {
 public:
  HeldStates() = default;
  HeldStates(HiddenStates& store, std::size_t count);
  ~HeldStates() { reset(); }
  HeldStates(HeldStates&& other) noexcept;
  HeldStates& operator=(HeldStates&& other) noexcept;
  HeldStates(const HeldStates&) = delete;
  HeldStates& operator=(const HeldStates&) = delete;

  std::span<const StateSlot> slots() const { return slots_; }
  StateSlot operator[](std::size_t i) const { return slots_[i]; }
  std::size_t size() const { return slots_.size(); }
  bool empty() const { return slots_.empty(); }
  void reset();

 private:
  HiddenStates* store_ = nullptr;
  std::vector<StateSlot> slots_;
};

// The CPU backend's store: the rows of one host matrix.
class HostStates final : public HiddenStates {
 public:
  explicit HostStates(std::int64_t width) : HiddenStates(width) {}

  Matrix read(std::span<const StateSlot> slots) const override;
  void write(std::span<const StateSlot> slots, const Matrix& rows) override;
  void copy(std::span<const StateSlot> from, std::span<const StateSlot> to) override;

 private:
  void grow(std::int64_t capacity) override;

  Matrix rows_;
};

}  // namespace exitsim::engine
