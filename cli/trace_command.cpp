#include <fmt/core.h>
#include <fmt/ranges.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <map>
#include <memory>

#include "commands.hpp"
#include "exitsim/analysis/step_graph.hpp"
#include "exitsim/analysis/trace_summary.hpp"
#include "exitsim/core/error.hpp"
#include "exitsim/core/suggest.hpp"
#include "exitsim/traces/chrome_trace.hpp"
#include "exitsim/traces/op_trace.hpp"
#include "exitsim/traces/request_trace.hpp"
#include "exitsim/traces/request_trace_writer.hpp"
#include "exitsim/traces/tracev2_writer.hpp"

namespace exitsim::cli {
namespace {

struct RequestTraceArgs {
  std::string path;
  std::string format = "auto";
  bool skip_bad_rows = false;
  std::string tokenizer;
  std::vector<std::string> columns;  // --format csv: "input_tokens=NAME", ...

  void add_to(CLI::App& command) {
    command
        .add_option("file", path,
                    "Request trace (Azure, Vidur/Metron, Mooncake, BurstGPT, "
                    "native, BLIS TraceV2, ShareGPT)")
        ->required();
    command.add_option("--format", format, "Override format detection")
        ->type_name("auto|" +
                    fmt::format("{}", fmt::join(traces::request_trace_format_names(), "|")));
    command.add_flag("--skip-bad-rows", skip_bad_rows,
                     "Skip and count malformed rows instead of stopping at the first");
    command.add_option("--tokenizer", tokenizer,
                       "tokenizer.json counting a ShareGPT trace's tokens");
    command
        .add_option("--columns", columns,
                    "--format csv: which header columns hold what, e.g. "
                    "input_tokens=prompt,output_tokens=completion,arrival=t,arrival_unit=s "
                    "(as workload.trace.columns)")
        ->delimiter(',');
  }

  // The --columns assignments as a mapping; errors name --columns.<key>.
  traces::CsvColumnMapping column_mapping() const {
    traces::CsvColumnMapping mapping;
    mapping.key_prefix = "--columns";
    for (const std::string& assignment : columns) {
      const std::size_t equals = assignment.find('=');
      const std::string key = assignment.substr(0, equals);
      std::string* field = key == "arrival"         ? &mapping.arrival
                           : key == "arrival_unit"  ? &mapping.arrival_unit
                           : key == "input_tokens"  ? &mapping.input_tokens
                           : key == "output_tokens" ? &mapping.output_tokens
                                                    : nullptr;
      if (equals == std::string::npos || field == nullptr) {
        throw InputError({"", 0, 0, "--columns"},
                         expected_found("KEY=COLUMN with KEY one of arrival, arrival_unit, "
                                        "input_tokens, output_tokens",
                                        "\"" + assignment + "\""));
      }
      *field = assignment.substr(equals + 1);
    }
    return mapping;
  }

  traces::RequestTraceOptions options() const {
    traces::RequestTraceOptions result;
    result.skip_bad_rows = skip_bad_rows;
    result.tokenizer = tokenizer;
    result.columns = column_mapping();
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

void convert_to_tracev2(traces::RequestSource& source, const std::string& out) {
  const traces::TraceV2WriteReport report = traces::write_tracev2_request_trace(source, out);
  fmt::print("wrote {} requests to {} and its header {} (tracev2 format", report.written, out,
             report.header_path);
  if (source.skipped_rows() > 0)
    fmt::print("; skipped {} rows", source.skipped_rows());
  fmt::print(")\n");
  if (report.arrivals_rounded > 0) {
    fmt::print("WARNING    {} arrivals rounded to the nearest microsecond (TraceV2's unit)\n",
               report.arrivals_rounded);
  }
  if (report.prefix_hashes_dropped > 0) {
    fmt::print(
        "WARNING    {} requests' prefix-block hashes not written (TraceV2 has no column "
        "for them)\n",
        report.prefix_hashes_dropped);
  }
}

void convert(const RequestTraceArgs& args, const std::string& out, const std::string& to) {
  const auto source = traces::open_request_trace(args.path, args.options());
  if (to == "tracev2") {
    convert_to_tracev2(*source, out);
    return;
  }
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
  // Events include the track names and the host-device flows, so they are not ops: say both.
  fmt::print("wrote {} ops as {} trace events (with track names and flows) to {}\n", ops,
             writer.events_written(), out);
  if (writer.truncated()) {
    fmt::print(
        "WARNING    {} trace events dropped at the size limit (--max-mb {:g}): the "
        "timeline ends early\n",
        writer.dropped_events(), max_mb);
  }
}

// Per step: wall time against the critical path of its op graph, and what lies on that path.
void critical_path(const std::string& op_trace) {
  const std::vector<analysis::StepGraph> steps = analysis::step_graphs(op_trace);
  if (steps.empty()) {
    fmt::print("no steps in {}\n", op_trace);
    return;
  }
  std::vector<double> shares;
  std::map<std::string, double> by_kind;
  double critical = 0;
  double wall = 0;
  for (const analysis::StepGraph& g : steps) {
    if (g.wall > 0)
      shares.push_back(g.critical_path_ns / static_cast<double>(g.wall));
    critical += g.critical_path_ns;
    wall += static_cast<double>(g.wall);
    for (const auto& [kind, ns] : g.critical_by_kind_ns)
      by_kind[kind] += ns;
  }
  std::sort(shares.begin(), shares.end());
  const auto at = [&](double p) {
    return shares.empty()
               ? 0.0
               : shares[std::min(shares.size() - 1,
                                 static_cast<std::size_t>(p * static_cast<double>(shares.size())))];
  };
  fmt::print(
      "steps      {}; critical path / wall per step: median {:.1f}%, p10 {:.1f}%; in all {:.1f} "
      "of {:.1f} ms (the rest: time in no op, on the host between ops)\n",
      steps.size(), 100 * at(0.5), 100 * at(0.1), critical / 1e6, wall / 1e6);
  std::vector<std::pair<double, std::string>> sorted;
  for (const auto& [kind, ns] : by_kind)
    sorted.emplace_back(ns, kind);
  std::sort(sorted.rbegin(), sorted.rend());
  for (const auto& [ns, kind] : sorted)
    fmt::print("  {:<22} {:>9.2f} ms  {:>5.1f}% of the critical path\n", kind, ns / 1e6,
               100 * ns / critical);
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
  auto convert_to = std::make_shared<std::string>("native");
  CLI::App* convert_command = group->add_subcommand(
      "convert", "Write a request trace in exitsim's native format or as BLIS TraceV2");
  convert_args->add_to(*convert_command);
  convert_command->add_option("--out,-o", *convert_out, "Output file")->required();
  convert_command
      ->add_option("--to", *convert_to,
                   "Output format: native, or tracev2 (the data CSV at --out, its YAML header "
                   "beside it with the extension .yaml)")
      ->check(CLI::IsMember({"native", "tracev2"}));
  convert_command->callback([convert_args, convert_out, convert_to] {
    convert(*convert_args, *convert_out, *convert_to);
  });

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

  auto path_in = std::make_shared<std::string>();
  CLI::App* path_command = group->add_subcommand(
      "critical-path",
      "Build each engine step's op dependency graph (the simulator's graph form) from an op "
      "trace and report its critical path against the step's wall time");
  path_command->add_option("op_trace", *path_in, "Op trace CSV")->required();
  path_command->callback([path_in] { critical_path(*path_in); });
}

}  // namespace exitsim::cli
