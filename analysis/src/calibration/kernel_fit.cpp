#include "exitsim/analysis/kernel_fit.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <string_view>

namespace exitsim::analysis {
namespace {

using gpu_fidelity::Comparison;
using gpu_fidelity::Family;
using gpu_fidelity::Point;

// One fitted parameter: its place in the hardware spec and its search interval.
struct Parameter {
  const char* key;
  double* value;
  double low, high;
};

// The points of one family (and, for send/recv, one placement), priced on `hardware`.
struct FamilyData {
  Family family;
  std::string setting;  // "" (all), or send/recv's "1 node" / "2 nodes"
  const gpu_fidelity::ProfileFiles* files;

  std::vector<double> ratios(const HardwareSpec& hardware) const {
    const Comparison c =
        gpu_fidelity::compare_profile(*files, hardware, gpu_fidelity::Gpu::a100, {{}, family});
    std::vector<double> out;
    for (const Point& p : c.points) {
      if (p.real_us > 0 && (setting.empty() || p.setting == setting))
        out.push_back(p.ratio());
    }
    return out;
  }
};

double log_loss(const std::vector<double>& ratios) {
  double sum = 0;
  std::size_t n = 0;
  for (const double r : ratios) {
    if (r > 0 && std::isfinite(r)) {
      sum += std::log(r) * std::log(r);
      ++n;
    }
  }
  return n == 0 ? 0 : sum / static_cast<double>(n);
}

// Golden-section search of `p` in [low, high] for the least `loss()` (unimodal in practice:
// each parameter moves its family's ratios one way).
void search(const Parameter& p, const std::function<double()>& loss) {
  constexpr double k_golden = 0.6180339887498949;
  constexpr int k_steps = 18;  // the interval shrinks to 0.0002 of itself
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

std::string describe(const std::vector<double>& ratios) {
  const gpu_fidelity::RatioSummary s = gpu_fidelity::summarize(ratios);
  return fmt::format("median {:.2f}, {:.0f}% in {:.2f}-{:.2f}", s.median,
                     100 * s.share_within_band(), gpu_fidelity::k_band_low,
                     gpu_fidelity::k_band_high);
}

// Latencies live in TimeNs; the search moves a double stand-in and writes it back.
struct LatencyField {
  TimeNs* field;
  double value;
  void store() { *field = static_cast<TimeNs>(std::llround(value)); }
};

}  // namespace

KernelFit fit_kernel_corrections(const gpu_fidelity::ProfileFiles& files,
                                 const HardwareSpec& base) {
  KernelFit fit{base, {}};
  HardwareSpec& hw = fit.hardware;
  KernelCorrections& k = hw.kernels;
  Interconnect& link = hw.interconnect;
  LatencyField collective{&link.link_latency, static_cast<double>(link.link_latency)};
  LatencyField send{&link.send_latency, static_cast<double>(link.send_latency)};
  LatencyField node{&link.node_link_latency, static_cast<double>(link.node_link_latency)};

  struct Group {
    const char* name;
    std::vector<FamilyData> data;
    std::vector<Parameter> parameters;
    std::vector<LatencyField*> latencies;  // written back before each pricing
  };
  const auto family = [&](Family f, std::string setting = "") {
    return FamilyData{f, std::move(setting), &files};
  };
  std::vector<Group> groups = {
      {"GEMMs and element-wise ops",
       {family(Family::gemm), family(Family::elementwise)},
       {{"hardware.min_kernel_us", &k.min_kernel_ns, 0, 20'000},
        {"hardware.ridge_exponent", &k.ridge_exponent, 1, 8},
        {"hardware.elementwise_efficiency", &k.elementwise_efficiency, 0.05, 1}},
       {}},
      {"decode attention",
       {family(Family::decode_attention)},
       {{"hardware.decode_attention_floor_us", &k.decode_attention_floor_ns, 0, 60'000},
        {"hardware.decode_attention_us_per_sequence_head", &k.decode_attention_ns_per_sequence_head,
         0, 1'000}},
       {}},
      {"prefill attention",
       {family(Family::prefill_attention)},
       {{"hardware.prefill_attention_efficiency", &k.prefill_attention_efficiency, 0.02, 1}},
       {}},
      {"all-reduce",
       {family(Family::all_reduce)},
       {{"hardware.link_latency_us", &collective.value, 0, 200'000},
        {"hardware.link_efficiency", &link.link_efficiency, 0.05, 1}},
       {&collective}},
      {"send/recv in one node",
       {family(Family::send_recv, "1 node")},
       {{"hardware.send_latency_us", &send.value, 0, 200'000},
        {"hardware.send_efficiency", &link.send_efficiency, 0.05, 1}},
       {&send}},
      {"send/recv across nodes",
       {family(Family::send_recv, "2 nodes")},
       {{"hardware.node_link_latency_us", &node.value, 0, 500'000},
        {"hardware.node_link_efficiency", &link.node_link_efficiency, 0.05, 1}},
       {&node}},
  };
  for (Group& g : groups) {
    const auto ratios = [&](const FamilyData& d) {
      for (LatencyField* l : g.latencies)
        l->store();
      return d.ratios(hw);
    };
    std::vector<std::vector<double>> before;
    bool measured = false;
    for (const FamilyData& d : g.data) {
      before.push_back(ratios(d));
      measured = measured || !before.back().empty();
    }
    if (!measured) {
      fit.report.push_back(
          fmt::format("{}: not measured by these files; kept {}'s values", g.name, base.name));
      continue;
    }
    const auto loss = [&] {
      double sum = 0;
      for (const FamilyData& d : g.data)
        sum += log_loss(ratios(d));
      return sum;
    };
    for (int round = 0; round < 2; ++round) {
      for (const Parameter& p : g.parameters)
        search(p, loss);
    }
    // A value the search ends on an edge of its interval is cut there: said, not written as fit.
    for (const Parameter& p : g.parameters) {
      const double margin = 1e-3 * (p.high - p.low);
      if (*p.value - p.low > margin && p.high - *p.value > margin)
        continue;
      const double unit = std::string_view(p.key).ends_with("_us") ? 1e3 : 1;  // times are in ns
      fit.report.push_back(
          fmt::format("{}: {:.4g} is the edge of the interval searched, [{:.4g}, {:.4g}]: the data "
                      "would put it "
                      "beyond; check the files measure what this parameter governs",
                      p.key, *p.value / unit, p.low / unit, p.high / unit));
    }
    for (LatencyField* l : g.latencies)
      l->store();
    for (std::size_t i = 0; i < g.data.size(); ++i) {
      const std::vector<double> after = ratios(g.data[i]);
      if (after.empty())
        continue;
      fit.report.push_back(
          fmt::format("{} ({} points): {} before, {} after",
                      std::string(gpu_fidelity::to_string(g.data[i].family)) +
                          (g.data[i].setting.empty() ? std::string() : ", " + g.data[i].setting),
                      after.size(), describe(before[i]), describe(after)));
    }
  }
  k.source = "fitted by exitsim calibrate --fit-hardware";
  return fit;
}

std::string kernel_corrections_yaml(const KernelFit& fit, const std::string& preset,
                                    const gpu_fidelity::ProfileFiles& files) {
  const HardwareSpec& fitted = fit.hardware;
  std::string report;
  for (const std::string& line : fit.report)
    report += "#   " + line + "\n";
  std::string fitted_from;
  const auto add = [&](const std::string& path) {
    if (!path.empty())
      fitted_from += "#   " + path + "\n";
  };
  for (const std::string& f : files.mlp)
    add(f);
  for (const std::string& f : files.attention)
    add(f);
  add(files.all_reduce);
  add(files.send_recv);
  const KernelCorrections& k = fitted.kernels;
  const Interconnect& link = fitted.interconnect;
  const auto us = [](double ns) { return ns / 1e3; };
  return fmt::format(
      "# Kernel corrections fitted by exitsim calibrate --fit-hardware (docs/calibration.md) to:\n"
      "{}"
      "# The fit (exitsim / measured kernel time, per family):\n"
      "{}"
      "# Paste this section into a scenario, or pass each key with --set.\n"
      "hardware:\n"
      "  preset: {}\n"
      "  min_kernel_us: {:.4g}\n"
      "  ridge_exponent: {:.4g}\n"
      "  elementwise_efficiency: {:.4g}\n"
      "  decode_attention_floor_us: {:.4g}\n"
      "  decode_attention_us_per_sequence_head: {:.4g}\n"
      "  prefill_attention_efficiency: {:.4g}\n"
      "  link_latency_us: {:.4g}\n"
      "  link_efficiency: {:.4g}\n"
      "  send_latency_us: {:.4g}\n"
      "  send_efficiency: {:.4g}\n"
      "  node_link_latency_us: {:.4g}\n"
      "  node_link_efficiency: {:.4g}\n",
      fitted_from, report, preset, us(k.min_kernel_ns), k.ridge_exponent, k.elementwise_efficiency,
      us(k.decode_attention_floor_ns), us(k.decode_attention_ns_per_sequence_head),
      k.prefill_attention_efficiency, us(static_cast<double>(link.link_latency)),
      link.link_efficiency, us(static_cast<double>(link.send_latency)), link.send_efficiency,
      us(static_cast<double>(link.node_link_latency)), link.node_link_efficiency);
}

}  // namespace exitsim::analysis
