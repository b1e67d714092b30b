#include "exitsim/analysis/run_digest.hpp"

#include <fmt/format.h>

#include <array>
#include <fstream>
#include <set>

#include "exitsim/core/random.hpp"
#include "exitsim/scenario/load.hpp"

namespace exitsim::analysis {
namespace {

constexpr std::uint64_t k_fnv_offset = 0xcbf29ce484222325ULL;
constexpr std::uint64_t k_fnv_prime = 0x100000001b3ULL;

// FNV-1a continued over more bytes (fnv1a_64 of the concatenation, chunk by chunk).
std::uint64_t fnv1a_continue(std::uint64_t hash, std::string_view bytes) {
  for (const char c : bytes) {
    hash ^= static_cast<unsigned char>(c);
    hash *= k_fnv_prime;
  }
  return hash;
}

std::uint64_t hash_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return fnv1a_64("missing");
  std::array<char, 1 << 16> buffer{};
  std::uint64_t hash = k_fnv_offset;
  while (in.read(buffer.data(), buffer.size()) || in.gcount() > 0)
    hash = fnv1a_continue(hash, {buffer.data(), static_cast<std::size_t>(in.gcount())});
  return hash;
}

// Every file path the run reads, whichever section names it.
std::set<std::string> input_files(const scenario::Scenario& s) {
  std::set<std::string> paths;
  const auto add = [&](const std::string& path) {
    if (!path.empty())
      paths.insert(path);
  };
  if (s.workload.source == "trace")
    add(s.workload.trace.path);
  for (const scenario::LengthConfig* lengths :
       {&s.workload.input_tokens, &s.workload.output_tokens}) {
    if (lengths->dist == "empirical")
      add(lengths->path);
  }
  add(s.cost_model.profile);
  for (const scenario::ReplicaGroup& group : s.replica_groups)
    add(group.cost_model.profile);
  add(s.exit_policy.threshold_table);
  add(s.exit_policy.token_trace);
  return paths;
}

}  // namespace

std::string run_digest(const scenario::Scenario& s, FileHashes& hashes) {
  std::uint64_t digest = fnv1a_continue(k_fnv_offset, scenario::render_resolved_yaml(s));
  for (const std::string& path : input_files(s)) {
    auto it = hashes.find(path);
    if (it == hashes.end())
      it = hashes.emplace(path, hash_file(path)).first;
    digest = fnv1a_continue(digest, fmt::format("\nfile {} {:016x}", path, it->second));
  }
  return fmt::format("{:016x}", digest);
}

}  // namespace exitsim::analysis
