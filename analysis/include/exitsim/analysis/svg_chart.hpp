#pragma once

#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace exitsim::analysis {

// Small self-contained SVG charts for the HTML report: no script, no network, fixed palette.

struct ChartSeries {
  std::string name;
  std::vector<std::pair<double, double>> points;  // (x, y), drawn in this order
  bool connect = true;                            // a line through the points, else markers only
  std::vector<std::string> labels;                // per point tooltip (may be empty)
};

struct ChartOptions {
  std::string title;
  std::string x_label;
  std::string y_label;
  bool log_x = false;
  int width = 900;
  int height = 360;
  bool legend = true;  // series names right of the plot
};

// A line/scatter chart over the union of the series' ranges, with axes, ticks and a legend.
// Non-finite points are skipped; with no finite point at all it returns "".
std::string svg_xy_chart(const ChartOptions& options, std::span<const ChartSeries> series);

// Vertical bars, one per (label, value).
std::string svg_bar_chart(const ChartOptions& options,
                          std::span<const std::pair<std::string, double>> bars);

std::string html_escape(std::string_view text);

// A <table> with a header row; cells are escaped.
std::string html_table(std::span<const std::string> header,
                       const std::vector<std::vector<std::string>>& rows);

}  // namespace exitsim::analysis
