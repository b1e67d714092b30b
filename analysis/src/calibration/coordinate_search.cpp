#include "coordinate_search.hpp"

#include <fmt/format.h>

namespace exitsim::analysis {

void golden_section_search(const SearchedParameter& p, const std::function<double()>& loss) {
  constexpr double k_golden = 0.6180339887498949;
  constexpr int k_steps = k_golden_section_evaluations - 2;
  double a = p.low;
  double b = p.high;
  double c = b - k_golden * (b - a);
  double d = a + k_golden * (b - a);
  *p.value = c;
  double fc = loss();
  *p.value = d;
  double fd = loss();
  for (int i = 0; i < k_steps; ++i) {
    if (fc < fd) {
      b = d;
      d = c;
      fd = fc;
      c = b - k_golden * (b - a);
      *p.value = c;
      fc = loss();
    } else {
      a = c;
      c = d;
      fc = fd;
      d = a + k_golden * (b - a);
      *p.value = d;
      fd = loss();
    }
  }
  *p.value = fc < fd ? c : d;
}

std::optional<std::string> edge_note(const SearchedParameter& p) {
  const double margin = 1e-3 * (p.high - p.low);
  if (*p.value - p.low > margin && p.high - *p.value > margin)
    return std::nullopt;
  return fmt::format(
      "{}: {:.4g} is the edge of the interval searched, [{:.4g}, {:.4g}]: the data would put it "
      "beyond; check the files measure what this parameter governs",
      p.key, *p.value / p.unit, p.low / p.unit, p.high / p.unit);
}

}  // namespace exitsim::analysis
