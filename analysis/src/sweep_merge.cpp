// Sweeps spread over several databases (job-array tasks, one database each): read as one, and
// merged into one file, refusing what belongs to another sweep.
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <system_error>

#include "exitsim/analysis/sweep.hpp"
#include "exitsim/core/error.hpp"

namespace exitsim::analysis {
namespace {

std::string short_identity(const std::string& identity) {
  return identity.substr(0, 12);
}

}  // namespace

SweepRuns read_sweep_databases(const std::vector<std::string>& paths) {
  SweepRuns out;
  std::string identity;
  std::string first;
  std::map<std::string, const RunRecord*> by_key;
  std::vector<std::vector<RunRecord>> all(paths.size());
  for (std::size_t i = 0; i < paths.size(); ++i) {
    const std::string& path = paths[i];
    if (!std::filesystem::exists(path))
      throw InputError({path, 0, 0, ""}, expected_found("a sweep database", "no file"));
    const SweepDatabase database(path, SweepDatabase::Access::read_only);
    const std::vector<SweepProvenance> rows = database.provenance();
    if (rows.empty()) {
      throw InputError({path, 0, 0, "provenance"},
                       expected_found("a database written by `exitsim sweep` "
                                      "0.1.0 or later (it records which sweep made its runs)",
                                      "no provenance"));
    }
    if (first.empty()) {
      first = path;
      identity = rows.back().identity;
    } else if (rows.back().identity != identity) {
      throw InputError(
          {path, 0, 0, "provenance"},
          expected_found(
              fmt::format("runs of the sweep in {} (identity {})", first, short_identity(identity)),
              fmt::format("another sweep (identity {}): its scenario, --set or input "
                          "files differ; merge shards of one sweep only",
                          short_identity(rows.back().identity))));
    }
    for (SweepProvenance row : rows) {
      if (row.source == "exitsim sweep")
        row.source = path;
      out.provenance.push_back(std::move(row));
    }
    all[i] = database.runs();
    for (const RunRecord& run : all[i]) {
      const auto [at, fresh] = by_key.emplace(run.point.key, &run);
      if (!fresh && at->second->point.digest != run.point.digest) {
        throw InputError({path, 0, 0, "runs"},
                         expected_found(fmt::format("point {} ({}) as an earlier database ran it",
                                                    run.point.index, run.point.key),
                                        "a run of it with another digest (a stale run: rerun "
                                        "that shard's sweep first)"));
      }
    }
  }
  for (const auto& [key, run] : by_key)
    out.runs.push_back(*run);
  std::stable_sort(out.runs.begin(), out.runs.end(), [](const RunRecord& a, const RunRecord& b) {
    return a.point.index < b.point.index;
  });
  return out;
}

std::size_t merge_sweep_databases(const std::string& out, const std::vector<std::string>& inputs) {
  if (std::filesystem::exists(out)) {
    throw InputError({out, 0, 0, "OUT"},
                     expected_found("a new file for the merged sweep", "an existing file"));
  }
  const SweepRuns merged = read_sweep_databases(inputs);
  const std::filesystem::path staging = out + ".merging";
  std::error_code ignored;
  std::filesystem::remove(staging, ignored);
  try {
    {
      SweepDatabase database(staging.string());
      for (const SweepProvenance& row : merged.provenance)
        database.record_provenance(row);
      for (const RunRecord& run : merged.runs)
        database.record(run);
    }
    std::filesystem::rename(staging, out);
  } catch (...) {
    std::filesystem::remove(staging, ignored);
    throw;
  }
  return merged.runs.size();
}

}  // namespace exitsim::analysis
