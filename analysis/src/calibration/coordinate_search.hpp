#pragma once
// The search calibrate's fits share (`--fit-hardware` in kernel_fit.cpp, `--against` in
// benchmark_fit.cpp): coordinate descent, one golden-section search per parameter, and the note
// for a value the search ended on an edge of its interval.

#include <functional>
#include <optional>
#include <string>

namespace exitsim::analysis {

// One searched parameter: its scenario key, the value the loss reads, and its search interval.
struct SearchedParameter {
  const char* key;
  double* value;
  double low, high;
  double unit = 1;  // `value` per unit of the key (1e3 where the key is in us and `value` in ns)
};

// Golden-section search of `p` in [low, high] for the least `loss()` (unimodal in practice: each
// parameter moves what it governs one way); leaves the better of the last two points in *value.
// 2 + 18 calls of `loss`: the interval shrinks to 0.0002 of itself.
void golden_section_search(const SearchedParameter& p, const std::function<double()>& loss);
inline constexpr int k_golden_section_evaluations = 20;

// "KEY: V is the edge of the interval searched, [L, H]: ..." for a value within 0.1% of the
// interval's width of one of its ends (a cut, not a fit), in the key's unit; nullopt inside.
std::optional<std::string> edge_note(const SearchedParameter& p);

}  // namespace exitsim::analysis
