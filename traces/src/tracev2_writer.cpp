// BLIS TraceV2 output: the data CSV with BLIS's 27 base columns (no optional ones) and the YAML
// header BLIS reads next to it. exitsim knows only a request's arrival and lengths; every other
// column is written as BLIS writes "not set": empty text, 0, false.
#include "exitsim/traces/tracev2_writer.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <iterator>

#include "exitsim/core/error.hpp"
#include "exitsim/traces/atomic_output.hpp"

namespace exitsim::traces {
namespace {

using detail::AtomicOutputFile;

constexpr TimeNs k_ns_per_us = 1'000;

// BLIS's traceV2Columns (sim/workload/tracev2.go), in its order.
constexpr std::string_view k_columns =
    "request_id,client_id,tenant_id,slo_class,session_id,round_index,prefix_group,prefix_length,"
    "streaming,input_tokens,output_tokens,text_tokens,image_tokens,audio_tokens,video_tokens,"
    "reason_ratio,model,deadline_us,server_input_tokens,arrival_time_us,send_time_us,"
    "first_chunk_time_us,last_chunk_time_us,num_chunks,status,error_message,finish_reason";

// mode "generated" is what BLIS writes for requests it did not observe on a server; a converted
// trace has no server measurements either (first/last chunk times are 0).
constexpr std::string_view k_header_yaml =
    "trace_version: 2\ntime_unit: us\nmode: generated\nwarm_up_requests: 0\n";

InputError tracev2_io_error(const AtomicOutputFile& file, AtomicOutputFile::Step step,
                            std::error_code reason) {
  const std::string& where =
      step == AtomicOutputFile::Step::rename ? file.path() : file.temp_path();
  const std::string text = reason ? reason.message() : "the file system reported an error";
  return InputError(SourceLocation{where, 0, 0, ""}, "cannot write request trace: " + text);
}

// Nanoseconds to the nearest microsecond, halves up (arrivals are non-negative).
TimeNs to_microseconds(TimeNs ns) {
  return ns / k_ns_per_us + (ns % k_ns_per_us >= k_ns_per_us / 2 ? 1 : 0);
}

}  // namespace

std::string tracev2_header_path(const std::string& data_path) {
  return std::filesystem::path(data_path).replace_extension(".yaml").string();
}

TraceV2WriteReport write_tracev2_request_trace(RequestSource& source,
                                               const std::string& data_path) {
  TraceV2WriteReport report;
  report.header_path = tracev2_header_path(data_path);
  if (report.header_path == data_path) {
    throw InputError(SourceLocation{data_path, 0, 0, ""},
                     expected_found("a data file name not ending in .yaml (the header takes "
                                    "that name)",
                                    "\"" + data_path + "\""));
  }
  AtomicOutputFile data(data_path, tracev2_io_error);
  data.write(std::string(k_columns) + "\n");
  std::string line;
  while (const std::optional<RequestDescriptor> request = source.next()) {
    if (!request->arrival) {
      throw InputError(SourceLocation{data_path, 0, 0, "arrival_time_us"},
                       expected_found("requests with arrival times (every TraceV2 row has one)",
                                      "a " + source.format_name() + " trace without them"));
    }
    const TimeNs us = to_microseconds(*request->arrival);
    if (us * k_ns_per_us != *request->arrival)
      ++report.arrivals_rounded;
    if (!request->prefix_hashes.empty())
      ++report.prefix_hashes_dropped;
    line.clear();
    // request_id is the row index, as BLIS writes it; input_tokens is the whole prompt (no
    // prefix_group, so nothing is split off as a shared prefix).
    fmt::format_to(std::back_inserter(line),
                   "{},,,,,0,,0,false,{},{},0,0,0,0,0,,0,0,{},{},0,0,0,,,\n", report.written,
                   request->input_tokens, request->output_tokens, us, us);
    data.write(line);
    ++report.written;
  }
  if (report.written == 0) {
    throw InputError(SourceLocation{data_path, 0, 0, ""},
                     expected_found("at least one request", "none"));
  }
  AtomicOutputFile header(report.header_path, tracev2_io_error);
  header.write(k_header_yaml);
  data.finish();
  header.finish();
  return report;
}

}  // namespace exitsim::traces
