#include "exitsim/setup/replay_lookup.hpp"

#include <fmt/format.h>

#include <cstdint>
#include <map>
#include <memory>
#include <utility>

#include "exitsim/core/error.hpp"
#include "exitsim/traces/token_trace.hpp"

namespace exitsim::setup {

policy::ExitLookup token_trace_lookup(const std::string& path, const DepthStructure& depth) {
  const auto last_exit = static_cast<int>(depth.effective_exit_points().size()) - 1;
  auto exits = std::make_shared<std::map<std::pair<std::uint64_t, std::int64_t>, int>>();
  traces::TokenTraceReader reader(path);
  while (auto row = reader.next()) {
    if (row->exit_point > last_exit) {
      throw InputError({path, reader.line(), 0, "exit_point"},
                       expected_found(fmt::format("an exit point index in [0, {}] (the model has "
                                                  "{} exit points)",
                                                  last_exit, last_exit + 1),
                                      std::to_string(row->exit_point)));
    }
    (*exits)[{row->request_id, row->position}] = row->exit_point;
  }
  if (exits->empty()) {
    throw InputError({path, 0, 0, ""},
                     expected_found("at least one token row to replay", "a header and no rows"));
  }
  return [exits](RequestId request, std::int64_t position) -> std::optional<int> {
    const auto found = exits->find({request.value, position});
    if (found == exits->end())
      return std::nullopt;
    return found->second;
  };
}

}  // namespace exitsim::setup
