// exitsim's one JSON reader (core/json_input.hpp), which every JSON input goes through: text
// and gzip files under caps lowered so that small inputs reach them (a few KB of gzip inflating
// past 1 MiB). Besides a clean refusal, what is read must keep the limits: no value deeper than
// 32 levels, and json_shown bounded.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "exitsim/core/json_input.hpp"
#include "fuzz_support.hpp"

namespace {

// Depth of `value` without recursion: containers count one level each.
int depth_of(const nlohmann::json& value) {
  int deepest = 0;
  std::vector<std::pair<const nlohmann::json*, int>> open = {{&value, 0}};
  while (!open.empty()) {
    const auto [at, depth] = open.back();
    open.pop_back();
    if (!at->is_structured())
      continue;
    deepest = std::max(deepest, depth + 1);
    for (const nlohmann::json& element : *at)
      open.emplace_back(&element, depth + 1);
  }
  return deepest;
}

void check_read(const nlohmann::json& value) {
  if (depth_of(value) > exitsim::k_max_json_nesting)
    exitsim::fuzz::finding("a value deeper than the nesting cap was read");
  if (exitsim::json_shown(value).size() > 64)
    exitsim::fuzz::finding("json_shown longer than its cut");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace exitsim;
  const JsonInput text_input{"input.json", "JSON", 1u << 16};
  fuzz::expect_clean([&] { check_read(parse_json(fuzz::as_text(data, size), text_input)); });
  // As a file that may be gzip: at most 64 KiB of it, inflating to at most 1 MiB.
  const JsonInput file_input{fuzz::input_file("input.json.gz", data, size), "JSON", 1u << 20,
                             1u << 16};
  fuzz::expect_clean([&] { check_read(read_json_file(file_input)); });
  return 0;
}
