#pragma once

#include <string_view>

namespace exitsim::embedded {

// scenarios/default.yaml, compiled in by exitsim_embed_text (scenarios/CMakeLists.txt).
std::string_view default_scenario_yaml();

// The source name of that text in messages and locations.
inline constexpr std::string_view k_default_scenario_name = "<embedded default>";

}  // namespace exitsim::embedded
