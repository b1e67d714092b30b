// The report's charts: tick labels a person can read.
#include "exitsim/analysis/svg_chart.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <regex>
#include <set>
#include <string>
#include <vector>

namespace exitsim::analysis {
namespace {

// The text of every tick label of one axis: x ticks are centred, y ticks end-anchored.
std::vector<std::string> labels(const std::string& svg, const std::string& anchor) {
  std::vector<std::string> out;
  const std::regex text("text-anchor=\"" + anchor + "\">([^<]*)</text>");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), text); it != std::sregex_iterator();
       ++it) {
    out.push_back((*it)[1].str());
  }
  return out;
}

// Throughputs 0.06% apart (the pipeline's old frontier): four significant digits gave two
// ticks the same label.
TEST(SvgChart, NeighbouringTicksNeverShareALabel) {
  const std::vector<ChartSeries> series = {
      {"runs", {{283.24, 1.0}, {283.31, 1.01}, {283.41, 1.03}}, false, {}}};
  const std::string svg = svg_xy_chart({"t", "tokens/s", "nll"}, series);
  std::vector<std::string> x = labels(svg, "middle");
  // The axis title is centred too; drop it.
  x.erase(std::remove(x.begin(), x.end(), "tokens/s"), x.end());
  ASSERT_GE(x.size(), 3U);
  EXPECT_EQ(std::set<std::string>(x.begin(), x.end()).size(), x.size()) << svg;
  const std::vector<std::string> y = labels(svg, "end");
  ASSERT_GE(y.size(), 3U);
  EXPECT_EQ(std::set<std::string>(y.begin(), y.end()).size(), y.size());
  // Round values at the step's precision, not the float noise of summing steps.
  for (const std::string& label : x)
    EXPECT_LE(label.size(), 6U) << label;
}

TEST(SvgChart, WideAxesKeepShortLabels) {
  const std::vector<ChartSeries> series = {{"runs", {{0, 0}, {12000, 1}}, true, {}}};
  const std::string svg = svg_xy_chart({"t", "x", "y"}, series);
  for (const std::string& label : labels(svg, "middle"))
    EXPECT_LE(label.size(), 5U) << label;
}

}  // namespace
}  // namespace exitsim::analysis
