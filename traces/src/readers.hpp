#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "exitsim/traces/request_source.hpp"
#include "exitsim/traces/request_trace.hpp"
#include "line_reader.hpp"

namespace exitsim::traces {

// One factory per format; each reads and checks its header before returning.
std::unique_ptr<RequestSource> open_azure_trace(TraceInput input, bool skip_bad_rows);
std::unique_ptr<RequestSource> open_vidur_trace(TraceInput input, bool skip_bad_rows);
std::unique_ptr<RequestSource> open_mooncake_trace(TraceInput input, bool skip_bad_rows);
std::unique_ptr<RequestSource> open_burstgpt_trace(TraceInput input, bool skip_bad_rows);
std::unique_ptr<RequestSource> open_native_trace(TraceInput input, bool skip_bad_rows);
std::unique_ptr<RequestSource> open_tracev2_trace(TraceInput input, bool skip_bad_rows);
std::unique_ptr<RequestSource> open_csv_trace(TraceInput input, bool skip_bad_rows,
                                              const CsvColumnMapping& columns);
// ShareGPT conversations, their turns counted in tokens of the tokenizer.json at tokenizer_path.
std::unique_ptr<RequestSource> open_sharegpt_trace(const std::string& path,
                                                   const std::string& tokenizer_path,
                                                   bool skip_bad_rows);
// The same from a trace format detection opened (a pipe or FIFO too): read from its first byte.
std::unique_ptr<RequestSource> open_sharegpt_trace(TraceInput input,
                                                   const std::string& tokenizer_path,
                                                   bool skip_bad_rows);

// Header text each CSV format starts with, shared by detection and the readers' checks.
inline constexpr std::string_view k_azure_header = "TIMESTAMP,ContextTokens,GeneratedTokens";
inline constexpr std::string_view k_vidur_header_prefix = "num_prefill_tokens,num_decode_tokens";
// Vidur's arrival traces (e.g. splitwise_conv.csv): arrived_at in seconds, then the lengths.
inline constexpr std::string_view k_vidur_arrival_header_prefix =
    "arrived_at,num_prefill_tokens,num_decode_tokens";
inline constexpr std::string_view k_native_magic = "# exitsim-requests";
inline constexpr std::string_view k_native_version_line = "# exitsim-requests v1";
inline constexpr std::string_view k_native_header =
    "request_id,arrival_ns,input_tokens,output_tokens";
// The same with the prompt's prefix blocks named (prefix caching): RequestDescriptor's
// prefix_block_tokens and prefix_hashes, the hashes separated by spaces.
inline constexpr std::string_view k_native_header_with_prefix =
    "request_id,arrival_ns,input_tokens,output_tokens,prefix_block_tokens,prefix_hashes";
// Tokens per named prefix block at most (Mooncake's are 512).
inline constexpr std::int64_t k_max_prefix_block_tokens = std::int64_t{1} << 20;
inline constexpr std::string_view k_burstgpt_time = "Timestamp";
inline constexpr std::string_view k_burstgpt_request = "Request tokens";
inline constexpr std::string_view k_burstgpt_response = "Response tokens";

// BLIS TraceV2 data files: the first column and the ones a request needs.
inline constexpr std::string_view k_tracev2_id = "request_id";
inline constexpr std::string_view k_tracev2_input = "input_tokens";
inline constexpr std::string_view k_tracev2_output = "output_tokens";
inline constexpr std::string_view k_tracev2_arrival = "arrival_time_us";
// "\"request_id\", ... and \"arrival_time_us\"" for messages.
std::string tracev2_required_columns();

// Whether a split CSV header line matches each format (detection and forced formats agree).
bool is_azure_header(std::string_view line);
bool is_vidur_header(std::string_view line);
bool is_burstgpt_header(std::string_view line);
bool is_tracev2_header(std::string_view line);

}  // namespace exitsim::traces
