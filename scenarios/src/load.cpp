#include "exitsim/scenario/load.hpp"

#include <fmt/format.h>

#include <array>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <system_error>

#include "embedded.hpp"
#include "input_paths.hpp"
#include "resolve.hpp"
#include "tree.hpp"

namespace exitsim::scenario {
namespace {

constexpr std::size_t k_max_scenario_bytes = std::size_t{16} << 20;

[[noreturn]] void cannot_open(const std::string& path, int error) {
  throw InputError(SourceLocation{path, 0, 0, ""},
                   "cannot open scenario: " + std::generic_category().message(error));
}

std::string read_file(const std::string& path) {
  std::error_code ec;
  // ifstream "opens" a directory on Linux and then reads nothing; say what is wrong instead.
  if (std::filesystem::is_directory(path, ec))
    cannot_open(path, EISDIR);
  errno = 0;
  std::ifstream in(path, std::ios::binary);
  if (!in)
    cannot_open(path, errno != 0 ? errno : ENOENT);
  // Read at most the cap and one byte more: a scenario is a few kilobytes, and /dev/zero or a
  // mistaken multi-gigabyte file must not be read until memory runs out.
  std::string text;
  std::array<char, 1 << 16> chunk{};
  while (text.size() <= k_max_scenario_bytes && in) {
    in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    text.append(chunk.data(), static_cast<std::size_t>(in.gcount()));
  }
  if (in.bad())
    cannot_open(path, errno != 0 ? errno : EIO);
  if (text.size() > k_max_scenario_bytes) {
    throw InputError(
        SourceLocation{path, 0, 0, ""},
        expected_found(fmt::format("a scenario of at most {} MiB", k_max_scenario_bytes >> 20),
                       "a larger file"));
  }
  return text;
}

}  // namespace

namespace {

// `scenario_dir`: where the file's relative input paths point from; nullopt for text that is no
// file's (the embedded default, a test's string), whose paths stay as written.
detail::Node parse_tree(std::string_view yaml, const std::string& source,
                        const std::optional<std::string>& scenario_dir) {
  detail::Node root = detail::parse_yaml(yaml, source);
  if (scenario_dir)
    detail::resolve_file_input_paths(root, *scenario_dir);
  return root;
}

Scenario resolve_tree_with(detail::Node root, const std::string& source,
                           std::span<const std::string> overrides) {
  for (const std::string& assignment : overrides)
    detail::apply_override(root, assignment);
  return detail::resolve_scenario(root, source);
}

Scenario load_tree(std::string_view yaml, const std::string& source,
                   const std::optional<std::string>& scenario_dir,
                   std::span<const std::string> overrides) {
  return resolve_tree_with(parse_tree(yaml, source, scenario_dir), source, overrides);
}

}  // namespace

struct ScenarioSource::Parsed {
  detail::Node root;
  std::string source;
};

ScenarioSource ScenarioSource::file(const std::string& path) {
  return ScenarioSource(std::make_shared<const Parsed>(
      Parsed{parse_tree(read_file(path), path, std::filesystem::path(path).parent_path().string()),
             path}));
}

ScenarioSource ScenarioSource::embedded_default() {
  const std::string source(embedded::k_default_scenario_name);
  return ScenarioSource(std::make_shared<const Parsed>(
      Parsed{parse_tree(default_scenario_text(), source, std::nullopt), source}));
}

ScenarioSource ScenarioSource::file_or_default(const std::string& path) {
  return path.empty() ? embedded_default() : file(path);
}

Scenario ScenarioSource::load(std::span<const std::string> overrides) const {
  return resolve_tree_with(parsed_->root, parsed_->source, overrides);
}

Scenario load_scenario_text(std::string_view yaml, std::string_view source_name,
                            std::span<const std::string> overrides) {
  return load_tree(yaml, std::string(source_name), std::nullopt, overrides);
}

Scenario load_scenario_file(const std::string& path, std::span<const std::string> overrides) {
  return load_tree(read_file(path), path, std::filesystem::path(path).parent_path().string(),
                   overrides);
}

Scenario load_default_scenario(std::span<const std::string> overrides) {
  return load_scenario_text(default_scenario_text(), embedded::k_default_scenario_name, overrides);
}

Scenario load_scenario_with_overlay(const std::string& path, std::span<const std::string> overrides,
                                    const std::string& overlay_path) {
  const std::string source = path.empty() ? std::string(embedded::k_default_scenario_name) : path;
  detail::Node root = path.empty() ? parse_tree(default_scenario_text(), source, std::nullopt)
                                   : parse_tree(read_file(path), path,
                                                std::filesystem::path(path).parent_path().string());
  for (const std::string& assignment : overrides)
    detail::apply_override(root, assignment);
  const detail::Node overlay =
      parse_tree(read_file(overlay_path), overlay_path,
                 std::filesystem::path(overlay_path).parent_path().string());
  detail::apply_overlay(root, overlay);
  return detail::resolve_scenario(root, source);
}

std::string_view default_scenario_text() {
  return embedded::default_scenario_yaml();
}

}  // namespace exitsim::scenario
