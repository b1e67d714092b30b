#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "exitsim/core/request.hpp"
#include "exitsim/traces/request_source.hpp"

namespace exitsim::traces {

namespace detail {
class AtomicOutputFile;
}  // namespace detail

// Writes requests in the native format (docs/traces.md) to `path`. Output goes to
// `path + ".tmp"` and is renamed onto `path` only by commit(), so an interrupted or failed write
// never leaves a partial trace where a reader would find it.
class NativeRequestTraceWriter {
 public:
  // Throws InputError "<path>.tmp: cannot write request trace: <reason>". With
  // `prefix_columns`, the file has the prefix-block columns whatever the first request holds
  // (for sources that may name prefix blocks on any request, such as Mooncake's hash_ids).
  explicit NativeRequestTraceWriter(std::string path, bool prefix_columns = false);
  // Removes the temporary file unless commit() succeeded.
  ~NativeRequestTraceWriter();
  NativeRequestTraceWriter(const NativeRequestTraceWriter&) = delete;
  NativeRequestTraceWriter& operator=(const NativeRequestTraceWriter&) = delete;

  // Requests must come in the order a reader accepts: increasing ids, non-decreasing arrivals,
  // arrivals on all requests or on none, token counts in [1, 2^31]. Throws InputError otherwise.
  // The file names prefix blocks (prefix_block_tokens, prefix_hashes) when it was opened with
  // prefix_columns or the first request names them; a later request naming them in a file
  // without those columns is refused, never cut.
  void write(const RequestDescriptor& request);
  // Flushes, closes and renames onto the final path. Throws InputError when nothing was
  // written (a reader would reject the file) or the file system fails.
  void commit();

  std::int64_t written() const { return written_; }
  const std::string& path() const { return path_; }

 private:
  [[noreturn]] void fail(const std::string& field, const std::string& message) const;

  std::string path_;
  std::unique_ptr<detail::AtomicOutputFile> file_;
  std::string line_;
  std::int64_t written_ = 0;
  std::optional<bool> arrivals_;
  bool prefix_columns_ = false;
  std::optional<std::uint64_t> last_id_;
  std::optional<TimeNs> last_arrival_;
};

// Drains `source` into a native trace at `path`, with the prefix columns when the source may
// carry prefix hashes; returns the number of requests written.
std::int64_t write_native_request_trace(RequestSource& source, const std::string& path);

}  // namespace exitsim::traces
