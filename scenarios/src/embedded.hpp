#pragma once

#include <string_view>

namespace exitsim::embedded {

// scenarios/default.yaml, compiled in by exitsim_embed_text (scenarios/CMakeLists.txt).
std::string_view default_scenario_yaml();

}  // namespace exitsim::embedded
