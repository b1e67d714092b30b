// Request traces in every format (detected from the header): read to the end; what was read is
// written as a native trace and read back unchanged.
#include <cstdint>
#include <filesystem>
#include <vector>

#include "exitsim/traces/request_trace.hpp"
#include "exitsim/traces/request_trace_writer.hpp"
#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace exitsim;
  const std::string path = fuzz::input_file("trace.csv", data, size);
  std::vector<RequestDescriptor> read;
  bool prefix_columns = false;
  fuzz::expect_clean([&] {
    const auto source = traces::open_request_trace(path);
    prefix_columns = source->may_carry_prefix_hashes();
    while (const auto request = source->next())
      read.push_back(*request);
  });
  if (read.empty())
    return 0;
  // A copy left by an earlier input must not be read back as this one's.
  const std::string copy = path + ".native.csv";
  std::filesystem::remove(copy);
  fuzz::expect_clean([&] {
    traces::NativeRequestTraceWriter writer(copy, prefix_columns);
    for (const RequestDescriptor& request : read)
      writer.write(request);
    writer.commit();
  });
  std::vector<RequestDescriptor> again;
  fuzz::expect_clean([&] {
    const auto source = traces::open_request_trace(copy);
    while (const auto request = source->next())
      again.push_back(*request);
  });
  if (!again.empty() && again.size() != read.size())
    fuzz::finding("a native copy read back with another request count");
  for (std::size_t i = 0; i < again.size(); ++i) {
    if (again[i].input_tokens != read[i].input_tokens ||
        again[i].output_tokens != read[i].output_tokens)
      fuzz::finding("a native copy read back with other lengths");
  }
  return 0;
}
