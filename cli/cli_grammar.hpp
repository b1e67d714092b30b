#pragma once

// The command line's shared grammar: old spellings kept for one release, and the defaults --help
// shows.

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

namespace exitsim::cli {

// An old spelling of a renamed option, kept for one release: it still works, says on stderr what
// replaces it, and is hidden from --help.
template <typename T>
CLI::Option* add_renamed_option(CLI::App& command, const std::string& old_name,
                                const std::string& new_name, T& target) {
  return command
      .add_option_function<T>(
          old_name,
          [old_name, new_name, &target](const T& value) {
            fmt::print(stderr,
                       "exitsim: note: {} is now {}; the old spelling goes in the next "
                       "release\n",
                       old_name, new_name);
            target = value;
          })
      ->group("");
}

// After every command is added: an option whose description states its default ("default: ...")
// or whose default is an empty list shows no captured value, which would contradict it or say
// nothing ("-1", "[]").
void tidy_help_defaults(CLI::App& app);

}  // namespace exitsim::cli
