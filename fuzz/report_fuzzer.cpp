// The report's JSON inputs: the first byte picks whether the rest is the --plan or the
// --validation file; the report is built from it alone (no sweep runs).
#include <cstdint>
#include <string>

#include "exitsim/analysis/report.hpp"
#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace exitsim;
  if (size == 0)
    return 0;
  analysis::ReportInputs in;
  const std::string text(fuzz::as_text(data + 1, size - 1));
  if (data[0] % 2 == 0) {
    in.plan_json = text;
    in.plan_path = "plan.json";
  } else {
    in.validation_json = text;
    in.validation_path = "validation.json";
  }
  fuzz::expect_clean([&] { (void)analysis::build_report(in); });
  return 0;
}
