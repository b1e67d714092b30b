#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "exitsim/scenario/scenario.hpp"

namespace exitsim::analysis {

// File content hashes by path, so that a sweep reads each input file once.
using FileHashes = std::map<std::string, std::uint64_t>;

// What a run's result depends on, as 16 hex digits: the fully resolved scenario (every key,
// presets expanded) and the content of every file it reads (the replayed trace, empirical length
// traces, cost profiles and tables, the quality table, a replayed token trace). Two runs with
// equal digests give equal results; editing the base scenario, a --set, or any of those files
// changes it. A missing file hashes as missing (the run itself then reports it).
std::string run_digest(const scenario::Scenario& scenario, FileHashes& hashes);

}  // namespace exitsim::analysis
