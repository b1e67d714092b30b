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
  // Draw each point's label beside it, where it overlaps no other label, marker or the frame;
  // a label with no room is a number there and a line of the key under the plot.
  bool show_labels = false;
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
// Point labels (ChartSeries::show_labels) are <text class="point-label">; the key of those
// with no room beside their point is <text class="label-key">.
std::string svg_xy_chart(const ChartOptions& options, std::span<const ChartSeries> series);

// Vertical bars, one per (label, value).
std::string svg_bar_chart(const ChartOptions& options,
                          std::span<const std::pair<std::string, double>> bars);

// The box a point label's text is taken to fill: font-size 10 sans-serif, 0.62 em a character
// (wider than the average glyph, so that boxes that do not overlap here do not on screen).
struct LabelBox {
  double x0 = 0, y0 = 0, x1 = 0, y1 = 0;
  bool overlaps(const LabelBox& o) const {
    return x0 < o.x1 && o.x0 < x1 && y0 < o.y1 && o.y0 < y1;
  }
};
// For text drawn at (x, baseline y) with anchor "start", "middle" or "end".
LabelBox label_box(double x, double baseline, std::string_view anchor, std::size_t characters);

std::string html_escape(std::string_view text);

// A <table> with a header row; cells are escaped.
std::string html_table(std::span<const std::string> header,
                       const std::vector<std::vector<std::string>>& rows);

}  // namespace exitsim::analysis
