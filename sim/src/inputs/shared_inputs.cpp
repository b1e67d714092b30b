// One read per file per process: per kind of file, a map from (variant, path, size, mtime) to the
// parsed file.
#include "exitsim/sim/inputs/shared_inputs.hpp"

#include <atomic>
#include <filesystem>
#include <map>
#include <mutex>
#include <tuple>

namespace exitsim::sim {
namespace {

// `variant`: what else the parse depends on (an exit table is read for one strategy).
using Key = std::tuple<std::string, std::string, std::uintmax_t, std::int64_t>;

std::atomic<std::size_t> g_reads{0};

// Size and modification time, or (0, 0) when the file cannot be stat'ed (the reader then names
// the problem; nothing is kept for a failed read).
Key key_of(std::string variant, const std::string& path) {
  std::error_code error;
  const std::uintmax_t size = std::filesystem::file_size(path, error);
  if (error)
    return {std::move(variant), path, 0, 0};
  const auto time = std::filesystem::last_write_time(path, error);
  const std::int64_t ticks = error ? 0 : static_cast<std::int64_t>(time.time_since_epoch().count());
  return {std::move(variant), path, size, ticks};
}

template <typename T, typename Read>
std::shared_ptr<const T> shared(std::string variant, const std::string& path, Read&& read) {
  static std::mutex mutex;
  static std::map<Key, std::shared_ptr<const T>> files;
  const Key key = key_of(std::move(variant), path);
  {
    const std::lock_guard lock(mutex);
    if (const auto it = files.find(key); it != files.end())
      return it->second;
  }
  // Read outside the lock: two threads may both read a new file once; both results are equal.
  auto value = std::make_shared<const T>(read());
  ++g_reads;
  const std::lock_guard lock(mutex);
  return files.try_emplace(key, std::move(value)).first->second;
}

}  // namespace

std::shared_ptr<const CostProfile> shared_cost_profile(const std::string& path) {
  return shared<CostProfile>("", path, [&] { return CostProfile::read(path); });
}

std::shared_ptr<const CostTable> shared_cost_table(const std::string& path) {
  return shared<CostTable>("", path, [&] { return CostTable::read(path); });
}

std::shared_ptr<const policy::ExitTable> shared_exit_table(const std::string& path,
                                                           std::string_view strategy) {
  return shared<policy::ExitTable>(std::string(strategy), path,
                                   [&] { return policy::ExitTable::read(path, strategy); });
}

std::shared_ptr<const policy::QualityTable> shared_quality_table(const std::string& path) {
  return shared<policy::QualityTable>("", path, [&] { return policy::QualityTable::read(path); });
}

std::shared_ptr<const policy::CalibrationTable> shared_calibration_table(const std::string& path) {
  return shared<policy::CalibrationTable>("", path,
                                          [&] { return policy::CalibrationTable::read(path); });
}

std::size_t shared_input_reads() {
  return g_reads.load();
}

}  // namespace exitsim::sim
