#pragma once

#include <cstdint>
#include <queue>
#include <vector>

#include "exitsim/core/time.hpp"

namespace exitsim::sim {

// The pending-event set: a min-heap keyed by (time, insertion sequence). Ties at equal times pop
// in insertion order, so a run never depends on heap internals and is reproducible bit for bit.
template <typename Payload>
class EventQueue {
 public:
  struct Event {
    TimeNs time;
    std::uint64_t sequence;
    Payload payload;
  };

  EventQueue() = default;
  EventQueue(const EventQueue&) = delete;
  EventQueue& operator=(const EventQueue&) = delete;

  void push(TimeNs time, Payload payload) {
    heap_.push(Event{time, next_sequence_++, std::move(payload)});
  }
  bool empty() const { return heap_.empty(); }
  std::size_t size() const { return heap_.size(); }
  const Event& top() const { return heap_.top(); }
  Event pop() {
    Event event = heap_.top();
    heap_.pop();
    return event;
  }

 private:
  struct Later {
    bool operator()(const Event& a, const Event& b) const {
      return a.time != b.time ? a.time > b.time : a.sequence > b.sequence;
    }
  };
  std::priority_queue<Event, std::vector<Event>, Later> heap_;
  std::uint64_t next_sequence_ = 0;
};

}  // namespace exitsim::sim
