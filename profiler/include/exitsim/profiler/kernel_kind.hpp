#pragma once

#include <string_view>

#include "exitsim/traces/op_trace.hpp"

namespace exitsim::profiler {

// The op kind a GPU kernel most likely is, from its (demangled) name: cuBLAS/CUTLASS GEMMs, flash
// and paged attention, norms, softmax/top-k sampling. Unknown names are OpKind::other; the
// engine's own host spans, not this guess, are what calibration should trust.
traces::OpKind classify_kernel(std::string_view name);

}  // namespace exitsim::profiler
