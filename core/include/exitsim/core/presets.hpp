#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "exitsim/core/hardware.hpp"
#include "exitsim/core/model_shape.hpp"

namespace exitsim {

// Built-in models with their published shapes and built-in accelerators from spec sheets.
std::optional<ModelShape> find_model_preset(std::string_view name);
std::vector<std::string> model_preset_names();

std::optional<HardwareSpec> find_hardware_preset(std::string_view name);
std::vector<std::string> hardware_preset_names();

}  // namespace exitsim
