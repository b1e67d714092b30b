#pragma once

#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace exitsim::cli {

// Each command registers its subcommand on the app; the callback runs the command and throws
// InputError for anything the user can fix. main() turns that into one line and exit code 1.
void add_simulate_command(CLI::App& app);
void add_scenario_commands(CLI::App& app);
void add_trace_commands(CLI::App& app);
void add_engine_commands(CLI::App& app);
// `exitsim engine profile-ops`, under the engine group.
void add_profile_ops_command(CLI::App& engine_group);
void add_calibrate_command(CLI::App& app);
void add_validate_command(CLI::App& app);
void add_sweep_command(CLI::App& app);
void add_plan_command(CLI::App& app);
void add_report_command(CLI::App& app);
// `exitsim cost`: one iteration's roofline prices, op by op.
void add_cost_command(CLI::App& app);
// `exitsim help [TOPIC...]` and `exitsim completion bash`: added last, as they read the others.
void add_help_commands(CLI::App& app);

}  // namespace exitsim::cli
