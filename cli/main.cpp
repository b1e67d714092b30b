#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>

#include "cli_grammar.hpp"
#include "commands.hpp"
#include "exitsim/core/error.hpp"
#include "exitsim/core/version.hpp"
#include "full_binary.hpp"
#include "progress.hpp"

namespace {

constexpr int k_exit_user_error = 1;
constexpr int k_exit_usage_error = 2;
constexpr int k_exit_internal_error = 3;

}  // namespace

int main(int argc, char** argv) {
#ifndef EXITSIM_FULL_BINARY
  if (exitsim::cli::needs_full_binary(argc, argv))
    return exitsim::cli::run_in_full_binary(argv);
#endif
  CLI::App app{
      "exitsim: simulate batched dynamic-depth LLM inference (early exit, recursion, "
      "routers) and chart whether it pays off"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "exitsim " + exitsim::version_line());
  // Every option's default shows in its --help.
  app.option_defaults()->always_capture_default();
  // --quiet may follow any command: options a command does not know fall through to here.
  app.fallthrough();
  app.add_flag_callback(
         "-q,--quiet", [] { exitsim::cli::set_quiet(true); },
         "No progress output (progress goes to stderr: a bar on a terminal, else a line each 10% "
         "or 30 s)")
      ->trigger_on_parse();
  exitsim::cli::add_simulate_command(app);
  exitsim::cli::add_cost_command(app);
  exitsim::cli::add_scenario_commands(app);
  exitsim::cli::add_trace_commands(app);
  exitsim::cli::add_engine_commands(app);
  exitsim::cli::add_calibrate_command(app);
  exitsim::cli::add_validate_command(app);
  exitsim::cli::add_sweep_command(app);
  exitsim::cli::add_plan_command(app);
  exitsim::cli::add_report_command(app);
  exitsim::cli::add_help_commands(app);
  exitsim::cli::tidy_help_defaults(app);

  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // One line, like every other error (CLI11's own print adds a second).
    fmt::print(stderr, "exitsim: error: {} (exitsim --help, or a command's --help, for usage)\n",
               e.what());
    return k_exit_usage_error;
  } catch (const exitsim::InputError& e) {
    std::fflush(stdout);
    fmt::print(stderr, "exitsim: error: {}\n", e.what());
    return k_exit_user_error;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    fmt::print(stderr, "exitsim: internal error: {}\n", e.what());
    return k_exit_internal_error;
  }
  return 0;
}
