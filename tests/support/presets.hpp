// The model and accelerator most cost-model tests price: Llama-3-8B on an H100 SXM, as presets.
#pragma once

#include "exitsim/core/presets.hpp"

namespace exitsim::test_support {

inline const ModelShape& llama_3_8b() {
  static const ModelShape m = *find_model_preset("llama-3-8b");
  return m;
}

inline const HardwareSpec& h100() {
  static const HardwareSpec h = *find_hardware_preset("h100-sxm");
  return h;
}

}  // namespace exitsim::test_support
