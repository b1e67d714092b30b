#include "exitsim/analysis/svg_chart.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

namespace exitsim::analysis {

namespace {

constexpr std::array<const char*, 8> k_palette = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                                                  "#9467bd", "#8c564b", "#e377c2", "#17becf"};
constexpr int k_left = 70, k_top = 36, k_bottom = 48;

struct Axis {
  double lo = 0, hi = 1;
  bool log = false;

  double transform(double v) const { return log ? std::log10(v) : v; }
  // Position of v in [0, 1] along the axis.
  double unit(double v) const {
    const double a = transform(lo), b = transform(hi);
    return b > a ? (transform(v) - a) / (b - a) : 0.5;
  }
};

// Five ticks at round values (or at powers of ten on a log axis).
std::vector<double> ticks(const Axis& axis) {
  std::vector<double> out;
  if (axis.log) {
    for (double p = std::floor(std::log10(axis.lo)); p <= std::ceil(std::log10(axis.hi)); ++p) {
      const double v = std::pow(10.0, p);
      if (v >= axis.lo && v <= axis.hi)
        out.push_back(v);
    }
    if (out.empty())
      out = {axis.lo, axis.hi};
    return out;
  }
  const double span = axis.hi - axis.lo;
  const double raw = span / 4;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  double step = magnitude;
  for (const double m : {1.0, 2.0, 5.0, 10.0}) {
    step = m * magnitude;
    if (step >= raw)
      break;
  }
  for (double v = std::ceil(axis.lo / step) * step; v <= axis.hi + step * 1e-9; v += step)
    out.push_back(std::abs(v) < step * 1e-9 ? 0.0 : v);
  return out;
}

std::string number(double v) {
  return fmt::format("{:.4g}", v);
}

// The ticks' labels, with as many significant digits as their step needs to tell neighbours
// apart (283.4 and 283.42, not "283.4" twice).
std::vector<std::string> tick_labels(const std::vector<double>& ticks, bool log) {
  std::vector<std::string> out;
  if (log || ticks.size() < 2) {
    for (const double t : ticks)
      out.push_back(number(t));
    return out;
  }
  const double step = ticks[1] - ticks[0];
  double largest = 0;
  for (const double t : ticks)
    largest = std::max(largest, std::abs(t));
  const int digits =
      largest > 0
          ? static_cast<int>(std::floor(std::log10(largest)) - std::floor(std::log10(step))) + 1
          : 1;
  for (const double t : ticks)
    out.push_back(fmt::format("{:.{}g}", t, std::clamp(digits, 1, 15)));
  return out;
}

Axis axis_over(double lo, double hi, bool log) {
  Axis a;
  a.log = log;
  if (!(hi > lo)) {
    const double pad = lo != 0 ? std::abs(lo) * 0.1 : 1.0;
    lo -= log ? 0 : pad;
    hi += pad;
  }
  if (!log) {
    const double pad = (hi - lo) * 0.05;
    lo = lo >= 0 && lo - pad < 0 ? 0 : lo - pad;
    hi += pad;
  }
  a.lo = lo;
  a.hi = hi;
  return a;
}

// Room for the legend right of the plot (none for bar charts).
int right_margin(const ChartOptions& o) {
  return o.legend ? 300 : 20;
}

std::string frame(const ChartOptions& o, const Axis& x, const Axis& y, bool x_ticks) {
  const int plot_w = o.width - k_left - right_margin(o), plot_h = o.height - k_top - k_bottom;
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} "
      "{1}\" font-family=\"sans-serif\" font-size=\"11\">\n"
      "<text x=\"{2}\" y=\"20\" font-size=\"14\" font-weight=\"bold\">{3}</text>\n"
      "<rect x=\"{4}\" y=\"{5}\" width=\"{6}\" height=\"{7}\" fill=\"none\" stroke=\"#888\"/>\n",
      o.width, o.height, k_left, html_escape(o.title), k_left, k_top, plot_w, plot_h);
  const std::vector<double> xs = x_ticks ? ticks(x) : std::vector<double>{};
  const std::vector<std::string> x_labels = tick_labels(xs, x.log);
  for (std::size_t k = 0; k < xs.size(); ++k) {
    const double px = k_left + x.unit(xs[k]) * plot_w;
    svg += fmt::format(
        "<line x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\" stroke=\"#eee\"/>"
        "<text x=\"{0:.1f}\" y=\"{3}\" text-anchor=\"middle\">{4}</text>\n",
        px, k_top, k_top + plot_h, k_top + plot_h + 14, x_labels[k]);
  }
  const std::vector<double> ys = ticks(y);
  const std::vector<std::string> y_labels = tick_labels(ys, y.log);
  for (std::size_t k = 0; k < ys.size(); ++k) {
    const double py = k_top + (1 - y.unit(ys[k])) * plot_h;
    svg += fmt::format(
        "<line x1=\"{0}\" y1=\"{1:.1f}\" x2=\"{2}\" y2=\"{1:.1f}\" stroke=\"#eee\"/>"
        "<text x=\"{3}\" y=\"{4:.1f}\" text-anchor=\"end\">{5}</text>\n",
        k_left, py, k_left + plot_w, k_left - 4, py + 4, y_labels[k]);
  }
  svg += fmt::format(
      "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n"
      "<text transform=\"translate(14 {}) rotate(-90)\" text-anchor=\"middle\">{}</text>\n",
      k_left + plot_w / 2, o.height - 10, html_escape(o.x_label), k_top + plot_h / 2,
      html_escape(o.y_label));
  return svg;
}

}  // namespace

std::string html_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string svg_xy_chart(const ChartOptions& o, std::span<const ChartSeries> series) {
  double x_lo = std::numeric_limits<double>::infinity(), x_hi = -x_lo;
  double y_lo = x_lo, y_hi = -x_lo;
  const auto usable = [&](const std::pair<double, double>& p) {
    return std::isfinite(p.first) && std::isfinite(p.second) && (!o.log_x || p.first > 0);
  };
  for (const ChartSeries& s : series) {
    for (const auto& p : s.points) {
      if (!usable(p))
        continue;
      x_lo = std::min(x_lo, p.first);
      x_hi = std::max(x_hi, p.first);
      y_lo = std::min(y_lo, p.second);
      y_hi = std::max(y_hi, p.second);
    }
  }
  if (!std::isfinite(x_lo))
    return "";
  const Axis x = axis_over(x_lo, x_hi, o.log_x);
  const Axis y = axis_over(y_lo, y_hi, false);
  const int plot_w = o.width - k_left - right_margin(o), plot_h = o.height - k_top - k_bottom;
  std::string svg = frame(o, x, y, true);
  for (std::size_t i = 0; i < series.size(); ++i) {
    const ChartSeries& s = series[i];
    const char* color = k_palette[i % k_palette.size()];
    std::string path;
    std::string marks;
    for (std::size_t k = 0; k < s.points.size(); ++k) {
      if (!usable(s.points[k]))
        continue;
      const double px = k_left + x.unit(s.points[k].first) * plot_w;
      const double py = k_top + (1 - y.unit(s.points[k].second)) * plot_h;
      path += fmt::format("{}{:.1f},{:.1f}", path.empty() ? "M" : " L", px, py);
      const std::string tip = k < s.labels.size()
                                  ? s.labels[k]
                                  : number(s.points[k].first) + ", " + number(s.points[k].second);
      marks += fmt::format(
          "<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3\" fill=\"{}\"><title>{}</title></circle>", px,
          py, color, html_escape(tip));
    }
    if (s.connect && !path.empty())
      svg += fmt::format("<path d=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\"/>\n",
                         path, color);
    svg += marks + "\n";
    svg += fmt::format(
        "<rect x=\"{}\" y=\"{}\" width=\"10\" height=\"10\" fill=\"{}\"/><text x=\"{}\" "
        "y=\"{}\">{}</text>\n",
        o.width - right_margin(o) + 10, k_top + 16 * static_cast<int>(i), color,
        o.width - right_margin(o) + 24, k_top + 9 + 16 * static_cast<int>(i), html_escape(s.name));
  }
  return svg + "</svg>\n";
}

std::string svg_bar_chart(const ChartOptions& o,
                          std::span<const std::pair<std::string, double>> bars) {
  if (bars.empty())
    return "";
  double hi = 0;
  for (const auto& [label, value] : bars)
    hi = std::max(hi, std::isfinite(value) ? value : 0.0);
  const Axis x = axis_over(0, static_cast<double>(bars.size()), false);
  const Axis y = axis_over(0, hi, false);
  const int plot_w = o.width - k_left - right_margin(o), plot_h = o.height - k_top - k_bottom;
  std::string svg = frame(o, x, y, false);
  const double slot = static_cast<double>(plot_w) / static_cast<double>(bars.size());
  for (std::size_t i = 0; i < bars.size(); ++i) {
    const double value = std::isfinite(bars[i].second) ? bars[i].second : 0.0;
    const double h = y.unit(value) * plot_h;
    const double px = k_left + slot * static_cast<double>(i) + slot * 0.15;
    svg += fmt::format(
        "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"{}\">"
        "<title>{}: {}</title></rect><text x=\"{:.1f}\" y=\"{}\" "
        "text-anchor=\"middle\">{}</text>\n",
        px, k_top + plot_h - h, slot * 0.7, h, k_palette[0], html_escape(bars[i].first),
        number(value), px + slot * 0.35, k_top + plot_h + 26, html_escape(bars[i].first));
  }
  return svg + "</svg>\n";
}

std::string html_table(std::span<const std::string> header,
                       const std::vector<std::vector<std::string>>& rows) {
  std::string out = "<table><thead><tr>";
  for (const std::string& h : header)
    out += "<th>" + html_escape(h) + "</th>";
  out += "</tr></thead><tbody>\n";
  for (const auto& row : rows) {
    out += "<tr>";
    for (const std::string& cell : row)
      out += "<td>" + html_escape(cell) + "</td>";
    out += "</tr>\n";
  }
  return out + "</tbody></table>\n";
}

}  // namespace exitsim::analysis
