// One read per file per process: a map from (kind, path, size, mtime) to the parsed file.
#include "exitsim/sim/inputs/shared_inputs.hpp"

#include <any>
#include <atomic>
#include <filesystem>
#include <map>
#include <mutex>
#include <tuple>

namespace exitsim::sim {
namespace {

using Key = std::tuple<std::string, std::string, std::uintmax_t, std::int64_t>;

std::mutex g_mutex;
std::map<Key, std::any> g_files;  // std::shared_ptr<const T> of the kind named in the key
std::atomic<std::size_t> g_reads{0};

// Size and modification time, or (0, 0) when the file cannot be stat'ed (the reader then names
// the problem; nothing is kept for a failed read).
Key key_of(std::string kind, const std::string& path) {
  std::error_code error;
  const std::uintmax_t size = std::filesystem::file_size(path, error);
  if (error)
    return {std::move(kind), path, 0, 0};
  const auto time = std::filesystem::last_write_time(path, error);
  const std::int64_t ticks = error ? 0 : static_cast<std::int64_t>(time.time_since_epoch().count());
  return {std::move(kind), path, size, ticks};
}

template <typename T, typename Read>
std::shared_ptr<const T> shared(std::string kind, const std::string& path, Read&& read) {
  const Key key = key_of(std::move(kind), path);
  {
    const std::lock_guard lock(g_mutex);
    if (const auto it = g_files.find(key); it != g_files.end())
      return std::any_cast<std::shared_ptr<const T>>(it->second);
  }
  // Read outside the lock: two threads may both read a new file once; both results are equal.
  auto value = std::make_shared<const T>(read());
  ++g_reads;
  const std::lock_guard lock(g_mutex);
  return std::any_cast<std::shared_ptr<const T>>(
      g_files.try_emplace(key, std::shared_ptr<const T>(value)).first->second);
}

}  // namespace

std::shared_ptr<const CostProfile> shared_cost_profile(const std::string& path) {
  return shared<CostProfile>("profile", path, [&] { return CostProfile::read(path); });
}

std::shared_ptr<const CostTable> shared_cost_table(const std::string& path) {
  return shared<CostTable>("cost table", path, [&] { return CostTable::read(path); });
}

std::shared_ptr<const policy::ExitTable> shared_exit_table(const std::string& path,
                                                           std::string_view strategy) {
  return shared<policy::ExitTable>("exit table " + std::string(strategy), path,
                                   [&] { return policy::ExitTable::read(path, strategy); });
}

std::shared_ptr<const policy::QualityTable> shared_quality_table(const std::string& path) {
  return shared<policy::QualityTable>("quality table", path,
                                      [&] { return policy::QualityTable::read(path); });
}

std::size_t shared_input_reads() {
  return g_reads.load();
}

}  // namespace exitsim::sim
