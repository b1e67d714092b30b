#pragma once
// The files a simulation reads besides its scenario - cost profiles, cost tables, exit and
// quality tables - read once per process and shared read-only by every run, replica and sweep
// thread that names them (a sweep or a capacity plan builds hundreds of simulations from one
// scenario). An entry is keyed by the path and the file's size and modification time, so a file
// rewritten in place is read again; a file that fails to read is not kept (the error repeats).

#include <memory>
#include <string>
#include <string_view>

#include "exitsim/policy/calibration_table.hpp"
#include "exitsim/policy/exit_table.hpp"
#include "exitsim/policy/quality_table.hpp"
#include "exitsim/sim/cost/cost_profile.hpp"
#include "exitsim/sim/cost/table_cost_model.hpp"

namespace exitsim::sim {

std::shared_ptr<const CostProfile> shared_cost_profile(const std::string& path);
std::shared_ptr<const CostTable> shared_cost_table(const std::string& path);
std::shared_ptr<const policy::ExitTable> shared_exit_table(const std::string& path,
                                                           std::string_view strategy);
std::shared_ptr<const policy::QualityTable> shared_quality_table(const std::string& path);
std::shared_ptr<const policy::CalibrationTable> shared_calibration_table(const std::string& path);

// Files read from disk by the functions above since the process started (for tests).
std::size_t shared_input_reads();

}  // namespace exitsim::sim
