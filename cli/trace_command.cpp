#include <fmt/core.h>
#include <fmt/ranges.h>

#include <CLI/CLI.hpp>
#include <memory>

#include "commands.hpp"
#include "exitsim/analysis/trace_summary.hpp"
#include "exitsim/core/error.hpp"
#include "exitsim/core/suggest.hpp"
#include "exitsim/traces/chrome_trace.hpp"
#include "exitsim/traces/op_trace.hpp"
#include "exitsim/traces/request_trace.hpp"
#include "exitsim/traces/request_trace_writer.hpp"

namespace exitsim::cli {
namespace {

struct RequestTraceArgs {
  std::string path;
  std::string format = "auto";
  bool skip_bad_rows = false;

  void add_to(CLI::App& command) {
    command
        .add_option("file", path,
                    "Request trace (Azure, Vidur/Metron, Mooncake, BurstGPT, "
                    "native)")
        ->required();
    command.add_option("--format", format, "Override format detection")
        ->type_name("auto|" +
                    fmt::format("{}", fmt::join(traces::request_trace_format_names(), "|")));
    command.add_flag("--skip-bad-rows", skip_bad_rows,
                     "Skip and count malformed rows instead of stopping at the first");
  }

  traces::RequestTraceOptions options() const {
    traces::RequestTraceOptions result;
    result.skip_bad_rows = skip_bad_rows;
    if (format != "auto") {
      result.format = traces::parse_request_trace_format(format);
      if (!result.format) {
        std::vector<std::string> names = traces::request_trace_format_names();
        names.insert(names.begin(), "auto");
        const std::string hint = nearest_match(format, names);
        throw InputError({"", 0, 0, "--format"},
                         expected_found(one_of(names), "\"" + format + "\"") +
                             (hint.empty() ? "" : "; did you mean \"" + hint + "\"?"));
      }
    }
    return result;
  }
};

void inspect(const RequestTraceArgs& args) {
  const auto source = traces::open_request_trace(args.path, args.options());
  const analysis::TraceSummary summary = analysis::summarize_requests(*source);
  fmt::print("{}", analysis::format_trace_summary(summary, args.path, source->format_name()));
}

void convert(const RequestTraceArgs& args, const std::string& out) {
  const auto source = traces::open_request_trace(args.path, args.options());
  const std::int64_t written = traces::write_native_request_trace(*source, out);
  fmt::print("wrote {} requests to {} (native format", written, out);
  if (source->skipped_rows() > 0)
    fmt::print("; skipped {} rows", source->skipped_rows());
  fmt::print(")\n");
}

void to_chrome(const std::string& op_trace, const std::string& out, double max_mb) {
  traces::OpTraceReader reader(op_trace);
  traces::ChromeTraceOptions options;
  options.max_bytes = static_cast<std::int64_t>(max_mb * 1024 * 1024);
  traces::ChromeTraceWriter writer(out, options);
  const std::int64_t ops = traces::write_op_trace_as_chrome(reader, writer);
  writer.finish();
  fmt::print("wrote {} of {} ops to {}{}\n", writer.events_written(), ops, out,
             writer.truncated() ? " (truncated at the size limit)" : "");
}

}  // namespace

void add_trace_commands(CLI::App& app) {
  CLI::App* group = app.add_subcommand("trace", "Read, inspect and convert traces");
  group->require_subcommand(1);

  auto inspect_args = std::make_shared<RequestTraceArgs>();
  CLI::App* inspect_command = group->add_subcommand(
      "inspect", "Count, span, mean rate, inter-arrival CV and length percentiles of a trace");
  inspect_args->add_to(*inspect_command);
  inspect_command->callback([inspect_args] { inspect(*inspect_args); });

  auto convert_args = std::make_shared<RequestTraceArgs>();
  auto convert_out = std::make_shared<std::string>();
  CLI::App* convert_command =
      group->add_subcommand("convert", "Write a request trace in exitsim's native format");
  convert_args->add_to(*convert_command);
  convert_command->add_option("--out,-o", *convert_out, "Output file")->required();
  convert_command->callback([convert_args, convert_out] { convert(*convert_args, *convert_out); });

  auto chrome_in = std::make_shared<std::string>();
  auto chrome_out = std::make_shared<std::string>();
  auto chrome_max_mb = std::make_shared<double>(256.0);
  CLI::App* chrome_command = group->add_subcommand(
      "chrome", "Convert an op trace to Chrome trace-event JSON (Perfetto, chrome://tracing)");
  chrome_command->add_option("op_trace", *chrome_in, "Op trace CSV")->required();
  chrome_command->add_option("--out,-o", *chrome_out, "Output JSON file")->required();
  chrome_command->add_option("--max-mb", *chrome_max_mb, "Stop adding events past this size")
      ->check(CLI::PositiveNumber);
  chrome_command->callback([chrome_in, chrome_out, chrome_max_mb] {
    to_chrome(*chrome_in, *chrome_out, *chrome_max_mb);
  });
}

}  // namespace exitsim::cli
