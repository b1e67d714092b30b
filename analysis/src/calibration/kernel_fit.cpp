#include "exitsim/analysis/kernel_fit.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>

#include "coordinate_search.hpp"

namespace exitsim::analysis {
namespace {

using gpu_fidelity::Comparison;
using gpu_fidelity::Family;
using gpu_fidelity::Point;

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
    std::vector<SearchedParameter> parameters;
    std::vector<LatencyField*> latencies;  // written back before each pricing
  };
  const auto family = [&](Family f, std::string setting = "") {
    return FamilyData{f, std::move(setting), &files};
  };
  std::vector<Group> groups = {
      {"GEMMs and element-wise ops",
       {family(Family::gemm), family(Family::elementwise)},
       {{"hardware.min_kernel_us", &k.min_kernel_ns, 0, 20'000, 1e3},
        {"hardware.ridge_exponent", &k.ridge_exponent, 1, 8},
        {"hardware.elementwise_efficiency", &k.elementwise_efficiency, 0.05, 1}},
       {}},
      {"decode attention",
       {family(Family::decode_attention)},
       {{"hardware.decode_attention_floor_us", &k.decode_attention_floor_ns, 0, 60'000, 1e3},
        {"hardware.decode_attention_us_per_sequence_head", &k.decode_attention_ns_per_sequence_head,
         0, 1'000, 1e3}},
       {}},
      {"prefill attention",
       {family(Family::prefill_attention)},
       {{"hardware.prefill_attention_efficiency", &k.prefill_attention_efficiency, 0.02, 1}},
       {}},
      {"all-reduce",
       {family(Family::all_reduce)},
       {{"hardware.link_latency_us", &collective.value, 0, 200'000, 1e3},
        {"hardware.link_efficiency", &link.link_efficiency, 0.05, 1}},
       {&collective}},
      {"send/recv in one node",
       {family(Family::send_recv, "1 node")},
       {{"hardware.send_latency_us", &send.value, 0, 200'000, 1e3},
        {"hardware.send_efficiency", &link.send_efficiency, 0.05, 1}},
       {&send}},
      {"send/recv across nodes",
       {family(Family::send_recv, "2 nodes")},
       {{"hardware.node_link_latency_us", &node.value, 0, 500'000, 1e3},
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
      for (const SearchedParameter& p : g.parameters)
        golden_section_search(p, loss);
    }
    // A value the search ends on an edge of its interval is cut there: said, not written as fit.
    for (const SearchedParameter& p : g.parameters) {
      if (std::optional<std::string> edge = edge_note(p))
        fit.report.push_back(std::move(*edge));
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

std::string hardware_section_yaml(const HardwareSpec& fitted, const HardwareSectionNotes& notes) {
  std::string out = "# " + notes.title + "\n";
  for (const std::string& path : notes.inputs)
    out += "#   " + path + "\n";
  out += "# " + notes.report_heading + "\n";
  for (const std::string& line : notes.report)
    out += "#   " + line + "\n";
  out += "# " + notes.usage + "\nhardware:\n";
  if (!notes.preset.empty())
    out += fmt::format("  preset: {}\n", notes.preset);
  const KernelCorrections& k = fitted.kernels;
  const Interconnect& link = fitted.interconnect;
  const auto us = [](double ns) { return ns / 1e3; };
  if (notes.efficiencies)
    out += fmt::format("  launch_overhead_us: {:.4g}\n",
                       us(static_cast<double>(fitted.launch_overhead)));
  out += fmt::format(
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
      us(k.min_kernel_ns), k.ridge_exponent, k.elementwise_efficiency,
      us(k.decode_attention_floor_ns), us(k.decode_attention_ns_per_sequence_head),
      k.prefill_attention_efficiency, us(static_cast<double>(link.link_latency)),
      link.link_efficiency, us(static_cast<double>(link.send_latency)), link.send_efficiency,
      us(static_cast<double>(link.node_link_latency)), link.node_link_efficiency);
  if (notes.efficiencies) {
    out += fmt::format("cost_model:\n  flops_efficiency: {:.4g}\n  bandwidth_efficiency: {:.4g}\n",
                       notes.efficiencies->flops, notes.efficiencies->bandwidth);
  }
  return out;
}

std::string kernel_corrections_yaml(const KernelFit& fit, const std::string& preset,
                                    const gpu_fidelity::ProfileFiles& files) {
  HardwareSectionNotes notes;
  notes.title =
      "Kernel corrections fitted by exitsim calibrate --fit-hardware (docs/calibration.md) to:";
  for (const std::vector<std::string>* list : {&files.mlp, &files.attention})
    notes.inputs.insert(notes.inputs.end(), list->begin(), list->end());
  for (const std::string* path : {&files.all_reduce, &files.send_recv}) {
    if (!path->empty())
      notes.inputs.push_back(*path);
  }
  notes.report_heading = "The fit (exitsim / measured kernel time, per family):";
  notes.report = fit.report;
  notes.usage = "Paste this section into a scenario, or pass each key with --set.";
  notes.preset = preset;
  return hardware_section_yaml(fit.hardware, notes);
}

}  // namespace exitsim::analysis
