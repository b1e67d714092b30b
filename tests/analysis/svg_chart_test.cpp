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

// The first group of every match of `pattern` in `svg`.
std::vector<std::string> captured(const std::string& svg, const std::string& pattern) {
  std::vector<std::string> out;
  const std::regex text(pattern);
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), text); it != std::sregex_iterator();
       ++it) {
    out.push_back((*it)[1].str());
  }
  return out;
}

// The text of every tick label of one axis: x ticks are centred, y ticks end-anchored.
std::vector<std::string> labels(const std::string& svg, const std::string& anchor) {
  return captured(svg, "text-anchor=\"" + anchor + "\">([^<]*)</text>");
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

// The pipeline's capacities (29 to 52 requests/s) and NLLs (1.003 to 1.051): plain numbers on
// both axes ("30", not "3e+01"), and at least three ticks on each.
TEST(SvgChart, TickLabelsArePlainNumbersAndAtLeastThree) {
  const std::vector<ChartSeries> series = {
      {"runs", {{29.1, 1.0029}, {46.75, 1.013}, {52.12, 1.0512}}, false, {}}};
  const std::string svg = svg_xy_chart({"t", "capacity", "nll"}, series);
  std::vector<std::string> x = labels(svg, "middle");
  x.erase(std::remove(x.begin(), x.end(), "capacity"), x.end());
  for (const std::vector<std::string>& axis : {x, labels(svg, "end")}) {
    EXPECT_GE(axis.size(), 3U) << svg;
    for (const std::string& label : axis)
      EXPECT_EQ(label.find('e'), std::string::npos) << label;
  }
}

struct DrawnLabel {
  std::string text;
  LabelBox box;
};

// Every point label drawn in the plot, with the box its text fills.
std::vector<DrawnLabel> point_labels(const std::string& svg) {
  std::vector<DrawnLabel> out;
  const std::regex text(
      "<text class=\"point-label\" x=\"([-0-9.]+)\" y=\"([-0-9.]+)\" text-anchor=\"(\\w+)\"[^>]*>"
      "([^<]*)</text>");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), text); it != std::sregex_iterator();
       ++it) {
    const std::string label = (*it)[4].str();
    out.push_back({label, label_box(std::stod((*it)[1].str()), std::stod((*it)[2].str()),
                                    (*it)[3].str(), label.size())});
  }
  return out;
}

// The key under the plot: the labels drawn as a number or not at all.
std::vector<std::string> key_lines(const std::string& svg) {
  return captured(svg, "<text class=\"label-key\"[^>]*>([^<]*)</text>");
}

// Every labelled point's label is on the chart, either beside the point or (no room there) as a
// number beside it and a line of the key; no two labels overlap, and none covers a marker.
void expect_labels_readable(const std::vector<ChartSeries>& series, const std::string& svg) {
  const std::vector<DrawnLabel> drawn = point_labels(svg);
  for (std::size_t i = 0; i < drawn.size(); ++i) {
    for (std::size_t j = i + 1; j < drawn.size(); ++j)
      EXPECT_FALSE(drawn[i].box.overlaps(drawn[j].box)) << drawn[i].text << " / " << drawn[j].text;
  }
  const std::regex circle("<circle cx=\"([-0-9.]+)\" cy=\"([-0-9.]+)\"");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), circle); it != std::sregex_iterator();
       ++it) {
    const double x = std::stod((*it)[1].str()), y = std::stod((*it)[2].str());
    const LabelBox marker{x - 3, y - 3, x + 3, y + 3};
    for (const DrawnLabel& l : drawn)
      EXPECT_FALSE(l.box.overlaps(marker)) << l.text << " covers the marker at " << x << "," << y;
  }
  std::set<std::string> shown;
  for (const DrawnLabel& l : drawn)
    shown.insert(l.text);
  const std::vector<std::string> key = key_lines(svg);
  for (const std::string& line : key) {
    const std::string number = line.substr(0, line.find(" = "));
    const std::string label =
        line.substr(line.find(" = ") + 3, line.rfind(" (") - line.find(" = ") - 3);
    if (line.find("not marked") == std::string::npos) {
      EXPECT_TRUE(shown.contains(number)) << "key " << number << " is not beside its point";
    }
    shown.insert(label);
  }
  for (const ChartSeries& s : series) {
    for (const std::string& label : s.labels)
      EXPECT_TRUE(shown.contains(label)) << label << " is neither drawn nor in the key";
  }
}

// Frontier points spread over the plot: each label fits beside its point.
TEST(SvgChart, PointLabelsSitBesideTheirPoints) {
  ChartSeries front{"frontier",
                    {{10, 1.0}, {12, 1.01}, {14, 1.03}, {16, 1.06}},
                    true,
                    {"full depth", "skip_kv 0.9", "skip_kv 0.7", "state_copy 0.5"},
                    true};
  const std::vector<ChartSeries> series = {front};
  const std::string svg = svg_xy_chart({"t", "capacity", "nll"}, series);
  EXPECT_EQ(point_labels(svg).size(), 4U) << svg;
  EXPECT_TRUE(key_lines(svg).empty());
  expect_labels_readable(series, svg);
}

// Twenty long labels on points a few pixels apart (a dense frontier): the labels that fit are
// drawn clear of each other and of every marker, the rest are numbers with a key, and none is
// lost.
TEST(SvgChart, CrowdedPointLabelsNeverOverlapAndNoneIsLost) {
  ChartSeries crowd{"crowd", {}, false, {}, true};
  for (int i = 0; i < 20; ++i) {
    crowd.points.emplace_back(100 + 0.2 * i, 1.0 + 0.001 * (i % 5));
    crowd.labels.push_back("state_copy threshold 0." + std::to_string(i) + " max_running=64");
  }
  const ChartSeries far{"far", {{0, 0.9}, {200, 1.1}}, false, {}};
  const std::vector<ChartSeries> series = {crowd, far};
  const std::string svg = svg_xy_chart({"t", "capacity", "nll"}, series);
  EXPECT_FALSE(key_lines(svg).empty()) << "twenty long labels cannot all fit there";
  EXPECT_FALSE(point_labels(svg).empty());
  expect_labels_readable(series, svg);
}

// N13: a benchmark file's control bytes (a terminal escape in validation.json's hardware) are
// written into the report as error messages write them, \xNN, never raw.
TEST(HtmlEscape, WritesControlBytesAsErrorMessagesDo) {
  EXPECT_EQ(html_escape("a\x1b[31m <b>&\"\x7f"), "a\\x1b[31m &lt;b&gt;&amp;&quot;\\x7f");
  EXPECT_EQ(html_escape("line\nnext\ttab"), "line\nnext\ttab");
}

}  // namespace
}  // namespace exitsim::analysis
