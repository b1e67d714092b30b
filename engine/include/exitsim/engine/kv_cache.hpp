#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace exitsim::engine {

// Keys and values in paged blocks. A *stream* is the K/V of one sequence at one executed layer
// (a prelude layer, a block layer at one recursion, or a coda layer); its rows are the tokens
// whose K/V exists there, in ascending position, each tagged with its position. Under skip_kv a
// stream lacks the tokens that exited before its recursion, and attention simply does not see
// them. Blocks of `block_size` rows come from one pool shared by all streams, so memory is
// charged for exactly the rows that exist.
class KvCache {
 public:
  // `kv_width`: n_kv_heads x head_dim floats per row for K and again for V. `host_blocks`: the
  // second tier's blocks, in host memory apart from the pool, where swap_out() parks a stream.
  KvCache(std::int64_t kv_width, std::int64_t block_size, std::int64_t total_blocks,
          std::int64_t host_blocks = 0);

  // A new empty stream (ids of closed streams are reused).
  int open_stream();
  // Frees the stream's blocks.
  void close_stream(int stream);

  // Appends one row; `position` must exceed the stream's last. Throws std::logic_error when the
  // pool is exhausted (admission control must prevent it) or positions go backwards.
  void append(int stream, std::int32_t position, std::span<const float> key,
              std::span<const float> value);

  // Appends a row without writing its values and returns its pool slot (see slot()): for a
  // backend that computes K and V where they live, the GPU backend's device pool. Throws as
  // append does.
  std::int64_t append_row(int stream, std::int32_t position);

  // Replaces the K and V of an existing row (append writes through it).
  void set_row(int stream, std::int64_t row, std::span<const float> key,
               std::span<const float> value);

  // Swap preemption: moves the stream's blocks (their K and V) to the host tier, freeing them in
  // the pool; its rows and positions stay known, and nothing may read or append them until
  // swap_in() copies them back into pool blocks (other blocks, most likely). Throws
  // std::logic_error when a tier has too few free blocks (admission control must prevent it).
  void swap_out(int stream);
  void swap_in(int stream);
  bool swapped(int stream) const;

  // Drops the rows at positions > `position` (a rollback), freeing blocks left empty.
  void truncate_after(int stream, std::int32_t position);

  std::int64_t rows(int stream) const;
  const float* key(int stream, std::int64_t row) const;
  const float* value(int stream, std::int64_t row) const;
  std::int32_t position(int stream, std::int64_t row) const;
  // Rows with position <= `position` (rows are ascending, so a prefix).
  std::int64_t rows_up_to(int stream, std::int32_t position) const;

  std::int64_t kv_width() const { return kv_width_; }
  std::int64_t block_size() const { return block_size_; }
  std::int64_t total_blocks() const { return total_blocks_; }
  std::int64_t free_blocks() const { return static_cast<std::int64_t>(free_.size()); }
  std::int64_t free_host_blocks() const { return static_cast<std::int64_t>(host_free_.size()); }
  std::int64_t blocks_of(int stream) const;
  // The stream's blocks in row order: row r lives in block blocks(stream)[r / block_size], at
  // pool slot block * block_size + r % block_size (a device mirror of the pool uses the same
  // slots, so the GPU backend reads K/V where the loop's bookkeeping says they are).
  std::span<const std::int32_t> blocks(int stream) const;
  std::int64_t slot(int stream, std::int64_t row) const;
  // The pool's K and V values, block after block as kernels::KvPoolShape lays them out: where a
  // device backend that computed them on the device copies them back.
  std::span<float> values() { return storage_; }
  // Blocks a stream needs to hold `rows` rows.
  std::int64_t blocks_for_rows(std::int64_t rows) const {
    return (rows + block_size_ - 1) / block_size_;
  }

 private:
  struct Stream {
    std::vector<std::int32_t> blocks;  // in the pool, or in the host tier while swapped
    std::vector<std::int32_t> positions;
    bool open = false;
    bool swapped = false;
  };
  // Moves the stream's blocks from one tier to the other (block data and the free lists).
  static void move_blocks(Stream& s, std::span<const float> from,
                          std::vector<std::int32_t>& from_free, std::vector<float>& to,
                          std::vector<std::int32_t>& to_free, std::size_t block_floats,
                          const char* tier);
  // Index into storage_ of a row's K (offset 0) or V (offset block_size).
  std::size_t row_index(const Stream& s, std::int64_t row, std::int64_t offset) const;
  const float* row_at(const Stream& s, std::int64_t row, std::int64_t offset) const {
    return storage_.data() + row_index(s, row, offset);
  }

  std::int64_t kv_width_;
  std::int64_t block_size_;
  std::int64_t total_blocks_;
  // One block: block_size rows of K, then block_size rows of V.
  std::vector<float> storage_;
  std::vector<std::int32_t> free_;
  std::vector<float> host_storage_;  // the second tier, laid out as storage_, grown on use
  std::vector<std::int32_t> host_free_;
  std::vector<Stream> streams_;
  std::vector<int> closed_;
};

}  // namespace exitsim::engine
