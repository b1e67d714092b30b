#include "exitsim/engine/kv_cache.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>
#include <string>

namespace exitsim::engine {

namespace {

// Handed out lowest first, so a run's layout does not depend on the pool size.
std::vector<std::int32_t> all_free(std::int64_t blocks) {
  std::vector<std::int32_t> free;
  free.reserve(static_cast<std::size_t>(blocks));
  for (std::int64_t b = blocks; b-- > 0;)
    free.push_back(static_cast<std::int32_t>(b));
  return free;
}

}  // namespace

KvCache::KvCache(std::int64_t kv_width, std::int64_t block_size, std::int64_t total_blocks,
                 std::int64_t host_blocks)
    : kv_width_(kv_width), block_size_(block_size), total_blocks_(total_blocks) {
  if (kv_width <= 0 || block_size <= 0 || total_blocks < 0 || host_blocks < 0)
    throw std::invalid_argument("KvCache: widths and sizes must be positive");
  storage_.resize(static_cast<std::size_t>(total_blocks * block_size * kv_width * 2));
  free_ = all_free(total_blocks);
  host_free_ = all_free(host_blocks);
}

int KvCache::open_stream() {
  int id = 0;
  if (!closed_.empty()) {
    id = closed_.back();
    closed_.pop_back();
  } else {
    id = static_cast<int>(streams_.size());
    streams_.emplace_back();
  }
  streams_[static_cast<std::size_t>(id)].open = true;
  return id;
}

void KvCache::close_stream(int stream) {
  Stream& s = streams_.at(static_cast<std::size_t>(stream));
  if (!s.open)
    throw std::logic_error("KvCache: stream " + std::to_string(stream) + " closed twice");
  std::vector<std::int32_t>& free = s.swapped ? host_free_ : free_;
  for (auto it = s.blocks.rbegin(); it != s.blocks.rend(); ++it)
    free.push_back(*it);
  s.blocks.clear();
  s.positions.clear();
  s.open = false;
  s.swapped = false;
  closed_.push_back(stream);
}

void KvCache::append(int stream, std::int32_t position, std::span<const float> key,
                     std::span<const float> value) {
  append_row(stream, position);
  set_row(stream, rows(stream) - 1, key, value);
}

std::int64_t KvCache::append_row(int stream, std::int32_t position) {
  Stream& s = streams_.at(static_cast<std::size_t>(stream));
  if (s.swapped)
    throw std::logic_error("KvCache: append to swapped stream " + std::to_string(stream));
  if (!s.positions.empty() && position <= s.positions.back()) {
    throw std::logic_error("KvCache: position " + std::to_string(position) + " after " +
                           std::to_string(s.positions.back()) + " in stream " +
                           std::to_string(stream));
  }
  const auto row = static_cast<std::int64_t>(s.positions.size());
  if (row % block_size_ == 0) {
    if (free_.empty())
      throw std::logic_error("KvCache: out of blocks (admission control let too much in)");
    s.blocks.push_back(free_.back());
    free_.pop_back();
  }
  s.positions.push_back(position);
  return slot(stream, row);
}

void KvCache::truncate_after(int stream, std::int32_t position) {
  Stream& s = streams_.at(static_cast<std::size_t>(stream));
  if (s.swapped)
    throw std::logic_error("KvCache: truncate of swapped stream " + std::to_string(stream));
  const auto keep = static_cast<std::int64_t>(
      std::upper_bound(s.positions.begin(), s.positions.end(), position) - s.positions.begin());
  s.positions.resize(static_cast<std::size_t>(keep));
  const std::int64_t blocks = blocks_for_rows(keep);
  while (static_cast<std::int64_t>(s.blocks.size()) > blocks) {
    free_.push_back(s.blocks.back());
    s.blocks.pop_back();
  }
}

void KvCache::move_blocks(Stream& s, std::span<const float> from,
                          std::vector<std::int32_t>& from_free, std::vector<float>& to,
                          std::vector<std::int32_t>& to_free, std::size_t block_floats,
                          const char* tier) {
  if (to_free.size() < s.blocks.size()) {
    throw std::logic_error(fmt::format("KvCache: {} blocks to move, {} free in the {}",
                                       s.blocks.size(), to_free.size(), tier));
  }
  for (std::int32_t& block : s.blocks) {
    const std::int32_t target = to_free.back();
    to_free.pop_back();
    // The host tier grows as it is used (blocks are handed out lowest first): a swap space of
    // gigabytes costs nothing until victims fill it.
    const std::size_t end = (static_cast<std::size_t>(target) + 1) * block_floats;
    if (to.size() < end)
      to.resize(end);
    const auto source = from.subspan(static_cast<std::size_t>(block) * block_floats, block_floats);
    std::copy(
        source.begin(), source.end(),
        to.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(target) * block_floats));
    from_free.push_back(block);
    block = target;
  }
}

void KvCache::swap_out(int stream) {
  Stream& s = streams_.at(static_cast<std::size_t>(stream));
  if (!s.open || s.swapped)
    throw std::logic_error("KvCache: swap_out of stream " + std::to_string(stream));
  move_blocks(s, storage_, free_, host_storage_, host_free_,
              static_cast<std::size_t>(block_size_ * kv_width_ * 2), "host tier");
  s.swapped = true;
}

void KvCache::swap_in(int stream) {
  Stream& s = streams_.at(static_cast<std::size_t>(stream));
  if (!s.open || !s.swapped)
    throw std::logic_error("KvCache: swap_in of stream " + std::to_string(stream));
  move_blocks(s, host_storage_, host_free_, storage_, free_,
              static_cast<std::size_t>(block_size_ * kv_width_ * 2), "pool");
  s.swapped = false;
}

bool KvCache::swapped(int stream) const {
  return streams_.at(static_cast<std::size_t>(stream)).swapped;
}

std::int64_t KvCache::rows(int stream) const {
  return static_cast<std::int64_t>(streams_.at(static_cast<std::size_t>(stream)).positions.size());
}

std::size_t KvCache::row_index(const Stream& s, std::int64_t row, std::int64_t offset) const {
  const std::int64_t block = s.blocks[static_cast<std::size_t>(row / block_size_)];
  return static_cast<std::size_t>(block * block_size_ * kv_width_ * 2 +
                                  (offset + row % block_size_) * kv_width_);
}

void KvCache::set_row(int stream, std::int64_t row, std::span<const float> key,
                      std::span<const float> value) {
  const Stream& s = streams_[static_cast<std::size_t>(stream)];
  std::copy(key.begin(), key.end(),
            storage_.begin() + static_cast<std::ptrdiff_t>(row_index(s, row, 0)));
  std::copy(value.begin(), value.end(),
            storage_.begin() + static_cast<std::ptrdiff_t>(row_index(s, row, block_size_)));
}

std::span<const std::int32_t> KvCache::blocks(int stream) const {
  return streams_[static_cast<std::size_t>(stream)].blocks;
}

std::int64_t KvCache::slot(int stream, std::int64_t row) const {
  const Stream& s = streams_[static_cast<std::size_t>(stream)];
  return std::int64_t{s.blocks[static_cast<std::size_t>(row / block_size_)]} * block_size_ +
         row % block_size_;
}

const float* KvCache::key(int stream, std::int64_t row) const {
  return row_at(streams_[static_cast<std::size_t>(stream)], row, 0);
}

const float* KvCache::value(int stream, std::int64_t row) const {
  return row_at(streams_[static_cast<std::size_t>(stream)], row, block_size_);
}

std::int32_t KvCache::position(int stream, std::int64_t row) const {
  return streams_[static_cast<std::size_t>(stream)].positions[static_cast<std::size_t>(row)];
}

std::int64_t KvCache::rows_up_to(int stream, std::int32_t position) const {
  const auto& positions = streams_.at(static_cast<std::size_t>(stream)).positions;
  return std::upper_bound(positions.begin(), positions.end(), position) - positions.begin();
}

std::int64_t KvCache::blocks_of(int stream) const {
  return static_cast<std::int64_t>(streams_.at(static_cast<std::size_t>(stream)).blocks.size());
}

}  // namespace exitsim::engine
