#include "exitsim/analysis/svg_chart.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <initializer_list>
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

// The values m x 10^p within a log axis, for each multiplier m.
std::vector<double> log_ticks(const Axis& axis, std::initializer_list<double> multipliers) {
  std::vector<double> out;
  for (double p = std::floor(std::log10(axis.lo)); p <= std::ceil(std::log10(axis.hi)); ++p) {
    for (const double m : multipliers) {
      const double v = m * std::pow(10.0, p);
      if (v >= axis.lo && v <= axis.hi)
        out.push_back(v);
    }
  }
  return out;
}

// Round values: powers of ten on a log axis (with the 1-2-5 values between them under three
// decades), three to seven steps of 1, 2, 2.5 or 5 x 10^k on a linear one.
std::vector<double> ticks(const Axis& axis) {
  if (axis.log) {
    std::vector<double> out = log_ticks(axis, {1.0});
    if (out.size() < 3)
      out = log_ticks(axis, {1.0, 2.0, 5.0});
    if (out.empty())
      out = {axis.lo, axis.hi};
    return out;
  }
  std::vector<double> out;
  // The smallest step of at least a sixth of the span.
  const double span = axis.hi - axis.lo;
  const double raw = span / 6;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  double step = magnitude;
  for (const double m : {1.0, 2.0, 2.5, 5.0, 10.0}) {
    step = m * magnitude;
    if (step >= raw)
      break;
  }
  for (double k = std::ceil(axis.lo / step); k * step <= axis.hi + step * 1e-9; ++k)
    out.push_back(std::abs(k) < 0.5 ? 0.0 : k * step);
  return out;
}

std::string number(double v) {
  return fmt::format("{:.4g}", v);
}

// The ticks' labels, with the decimals their step needs to tell neighbours apart (283.4 and
// 283.45, not "283.4" twice) and in plain notation (30, not 3e+01); in scientific notation only
// beyond a million or below a thousandth.
std::vector<std::string> tick_labels(const std::vector<double>& ticks, bool log) {
  std::vector<std::string> out;
  double largest = 0;
  for (const double t : ticks)
    largest = std::max(largest, std::abs(t));
  const bool plain = largest < 1e6 && largest >= 1e-3;
  if (log || ticks.size() < 2 || !plain) {
    for (const double t : ticks)
      out.push_back(plain ? fmt::format("{:g}", t) : number(t));
    return out;
  }
  const double step = ticks[1] - ticks[0];
  // A step of m x 10^k (m in 1, 2, 2.5, 5) needs -k decimals, one more for 2.5.
  const double exponent = std::floor(std::log10(step) + 1e-9);
  const double mantissa = step / std::pow(10.0, exponent);
  const int decimals =
      std::max(0, static_cast<int>(-exponent) + (std::abs(mantissa - 2.5) < 1e-6 ? 1 : 0));
  for (const double t : ticks)
    out.push_back(fmt::format("{:.{}f}", t, decimals));
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
  } else {
    // 5% of the span in decades each side, so that no point sits on the frame.
    const double pad = std::pow(hi / lo, 0.05);
    lo /= pad;
    hi *= pad;
  }
  a.lo = lo;
  a.hi = hi;
  return a;
}

// Room for the legend right of the plot (none for bar charts).
int right_margin(const ChartOptions& o) {
  return o.legend ? 300 : 20;
}

// `below` adds room under the axis title (for a chart's key).
std::string frame(const ChartOptions& o, const Axis& x, const Axis& y, bool x_ticks,
                  int below = 0) {
  const int plot_w = o.width - k_left - right_margin(o), plot_h = o.height - k_top - k_bottom;
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} "
      "{1}\" font-family=\"sans-serif\" font-size=\"11\">\n"
      "<text x=\"{2}\" y=\"20\" font-size=\"14\" font-weight=\"bold\">{3}</text>\n"
      "<rect x=\"{4}\" y=\"{5}\" width=\"{6}\" height=\"{7}\" fill=\"none\" stroke=\"#888\"/>\n",
      o.width, o.height + below, k_left, html_escape(o.title), k_left, k_top, plot_w, plot_h);
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

// A drawn point: its series, its index there and its position in pixels.
struct Marker {
  std::size_t series = 0, point = 0;
  double x = 0, y = 0;
};

struct PlacedLabels {
  std::string svg;               // the labels, numbers and leader lines drawn in the plot
  std::vector<std::string> key;  // "n = label (x, y)" for labels drawn as a number or not at all
};

constexpr double k_label_em = 10;  // point labels' font size

// Where a label may go, in order of preference: beside the point (right, left, above, below,
// then the diagonals), then further out in the same directions with a leader line.
struct Spot {
  double ux, uy;  // direction from the point to the label
};
constexpr std::array<Spot, 8> k_spots = {
    {{1, 0}, {-1, 0}, {0, -1}, {0, 1}, {0.7, -0.7}, {0.7, 0.7}, {-0.7, -0.7}, {-0.7, 0.7}}};
constexpr std::array<double, 4> k_reaches = {5, 16, 28, 44};  // pixels from the point to the label

// Labels in series order, each at the first spot whose box stays in the plot and overlaps no
// marker and no label placed before it.
PlacedLabels place_labels(std::span<const ChartSeries> series, const std::vector<Marker>& markers,
                          const LabelBox& plot) {
  PlacedLabels out;
  std::vector<LabelBox> taken;
  for (const Marker& m : markers)
    taken.push_back({m.x - 3.5, m.y - 3.5, m.x + 3.5, m.y + 3.5});
  const auto fits = [&](const LabelBox& b) {
    if (b.x0 < plot.x0 || b.x1 > plot.x1 || b.y0 < plot.y0 || b.y1 > plot.y1)
      return false;
    return std::none_of(taken.begin(), taken.end(),
                        [&](const LabelBox& t) { return t.overlaps(b); });
  };
  // Draws `text` at the first spot that fits; false when none does.
  const auto place = [&](const Marker& m, const std::string& text) {
    for (const double reach : k_reaches) {
      for (const Spot& spot : k_spots) {
        const char* anchor = spot.ux > 0 ? "start" : spot.ux < 0 ? "end" : "middle";
        const double tx = m.x + spot.ux * reach;
        // The box's centre sits `reach` past the point's edge vertically; the baseline is
        // 0.275 em below the centre of a box 0.8 em up and 0.25 em down from it.
        const double half = 0.525 * k_label_em;
        const double cy = m.y + (spot.uy == 0 ? 0 : spot.uy * reach + (spot.uy > 0 ? half : -half));
        const double ty = cy + 0.275 * k_label_em;
        const LabelBox box = label_box(tx, ty, anchor, text.size());
        if (!fits(box))
          continue;
        taken.push_back(box);
        if (reach > k_reaches[0]) {
          const double lx = std::clamp(m.x, box.x0, box.x1);
          const double ly = std::clamp(m.y, box.y0, box.y1);
          out.svg += fmt::format(
              "<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#999\" "
              "stroke-width=\"0.7\"/>",
              m.x, m.y, lx, ly);
        }
        out.svg += fmt::format(
            "<text class=\"point-label\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"{}\" "
            "font-size=\"{}\">{}</text>\n",
            tx, ty, anchor, k_label_em, html_escape(text));
        return true;
      }
    }
    return false;
  };
  for (const Marker& m : markers) {
    const ChartSeries& s = series[m.series];
    if (!s.show_labels || m.point >= s.labels.size() || s.labels[m.point].empty())
      continue;
    const std::string& label = s.labels[m.point];
    if (place(m, label))
      continue;
    const std::string n = std::to_string(out.key.size() + 1);
    const auto& p = s.points[m.point];
    out.key.push_back(fmt::format("{} = {} ({}, {}){}", n, label, number(p.first), number(p.second),
                                  place(m, n) ? "" : ", not marked: no room"));
  }
  return out;
}

}  // namespace

LabelBox label_box(double x, double baseline, std::string_view anchor, std::size_t characters) {
  const double width = 0.62 * k_label_em * static_cast<double>(characters);
  const double x0 = anchor == "end" ? x - width : anchor == "middle" ? x - width / 2 : x;
  // Ascent above the baseline, a descent below it.
  return {x0, baseline - 0.8 * k_label_em, x0 + width, baseline + 0.25 * k_label_em};
}

namespace {

// A control byte other than a line break or tab: written as \xNN, as error messages write it,
// so that a file's terminal escape does not reach the page (an HTML document may not hold it).
bool is_control_byte(char c) {
  const auto byte = static_cast<unsigned char>(c);
  return (byte < 0x20 && c != '\n' && c != '\r' && c != '\t') || byte == 0x7f;
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
        if (is_control_byte(c))
          out += fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
        else
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
  // Every drawn point's position first: labels are placed clear of all the markers.
  std::vector<Marker> markers;
  for (std::size_t i = 0; i < series.size(); ++i) {
    for (std::size_t k = 0; k < series[i].points.size(); ++k) {
      const auto& p = series[i].points[k];
      if (usable(p)) {
        markers.push_back(
            {i, k, k_left + x.unit(p.first) * plot_w, k_top + (1 - y.unit(p.second)) * plot_h});
      }
    }
  }
  const LabelBox plot{k_left + 1.0, k_top + 1.0, k_left + plot_w - 1.0, k_top + plot_h - 1.0};
  const PlacedLabels placed = place_labels(series, markers, plot);
  std::string svg = frame(o, x, y, true, 14 * static_cast<int>(placed.key.size()));
  for (std::size_t i = 0; i < series.size(); ++i) {
    const ChartSeries& s = series[i];
    const char* color = k_palette[i % k_palette.size()];
    std::string path;
    std::string marks;
    for (const Marker& m : markers) {
      if (m.series != i)
        continue;
      path += fmt::format("{}{:.1f},{:.1f}", path.empty() ? "M" : " L", m.x, m.y);
      const auto& p = s.points[m.point];
      const std::string tip =
          m.point < s.labels.size() ? s.labels[m.point] : number(p.first) + ", " + number(p.second);
      marks += fmt::format(
          "<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3\" fill=\"{}\"><title>{}</title></circle>", m.x,
          m.y, color, html_escape(tip));
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
  svg += placed.svg;
  for (std::size_t k = 0; k < placed.key.size(); ++k) {
    svg += fmt::format("<text class=\"label-key\" x=\"{}\" y=\"{}\">{}</text>\n", k_left,
                       o.height + 14 * static_cast<int>(k) + 4, html_escape(placed.key[k]));
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
