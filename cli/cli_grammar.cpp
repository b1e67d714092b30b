#include "cli_grammar.hpp"

namespace exitsim::cli {

void tidy_help_defaults(CLI::App& app) {
  for (CLI::Option* option : app.get_options()) {
    const std::string& described = option->get_description();
    if (option->get_default_str() == "[]" || described.find("(default") != std::string::npos ||
        described.find("default:") != std::string::npos) {
      option->default_str("");
    }
  }
  for (CLI::App* command : app.get_subcommands({}))
    tidy_help_defaults(*command);
}

}  // namespace exitsim::cli
