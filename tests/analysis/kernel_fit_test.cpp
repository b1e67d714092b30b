// calibrate --fit-hardware's fitter (analysis::fit_kernel_corrections) recovers the link's
// latency and bus bandwidth from Vidur-format network files made from known values, and keeps
// what the files do not measure.

#include "exitsim/analysis/kernel_fit.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <string>

#include "exitsim/core/presets.hpp"
#include "support/test_files.hpp"

namespace exitsim::analysis {
namespace {

using test_support::TempDir;

// Vidur's network CSV (pandas index first) for `collective` among `workers` GPUs, `per_node` of
// them to a node: each size's median time = latency + bytes / bandwidth, in ms as Vidur writes it;
// `bytes_of(size, workers)` the bytes the link carries.
template <class Bytes>
std::string network_csv(const std::string& collective, std::initializer_list<int> workers,
                        int per_node, double latency_us, double bytes_per_us, Bytes bytes_of) {
  std::string csv = fmt::format(
      ",time_stats.{0}.min,time_stats.{0}.max,time_stats.{0}.mean,time_stats.{0}."
      "median,time_stats.{0}.std,rank,num_workers,size,collective,devices_per_node,"
      "max_devices_per_node\n",
      collective);
  int row = 0;
  for (const int w : workers) {
    for (std::int64_t size = 2048; size <= (std::int64_t{64} << 20); size = size * 2 + 8192) {
      const double ms = (latency_us + bytes_of(static_cast<double>(size), w) / bytes_per_us) / 1e3;
      csv += fmt::format("{},{},{},{},{},0,0,{},{},{},{},8\n", row++, ms, ms, ms, ms, w, size,
                         collective, per_node == 0 ? w : per_node);
    }
  }
  return csv;
}

TEST(KernelFit, RecoversAllReduceLatencyAndBusBandwidthFromTheirTimes) {
  TempDir dir;
  const HardwareSpec base = *find_hardware_preset("h100-sxm");
  // 17 us and 0.61 of the 450 GB/s link: neither the preset's 29 us nor its 0.78.
  const double bytes_per_us = 450e9 * 0.61 / 1e6;
  gpu_fidelity::ProfileFiles files;
  files.all_reduce = dir.write(
      "all_reduce.csv", network_csv("all_reduce", {2, 4, 8}, 0, 17.0, bytes_per_us,
                                    [](double size, int p) { return 2.0 * (p - 1) / p * size; }));
  const KernelFit fit = fit_kernel_corrections(files, base);
  EXPECT_NEAR(static_cast<double>(fit.hardware.interconnect.link_latency), 17'000, 200);
  EXPECT_NEAR(fit.hardware.interconnect.link_efficiency, 0.61, 0.005);
}

TEST(KernelFit, RecoversSendLatencyAndShareWithinANodeAndAcrossNodes) {
  TempDir dir;
  const HardwareSpec base = *find_hardware_preset("a100-80gb");
  const auto bytes = [](double size, int) { return size; };
  std::string csv = network_csv("send_recv", {2}, 2, 9.0, 300e9 * 0.7 / 1e6, bytes);
  std::string across = network_csv("send_recv", {2}, 1, 45.0, 25e9 * 0.5 / 1e6, bytes);
  csv += across.substr(across.find('\n') + 1);  // one header
  gpu_fidelity::ProfileFiles files;
  files.send_recv = dir.write("send_recv.csv", csv);
  const KernelFit fit = fit_kernel_corrections(files, base);
  const Interconnect& link = fit.hardware.interconnect;
  EXPECT_NEAR(static_cast<double>(link.send_latency), 9'000, 200);
  EXPECT_NEAR(link.send_efficiency, 0.7, 0.005);
  EXPECT_NEAR(static_cast<double>(link.node_link_latency), 45'000, 500);
  EXPECT_NEAR(link.node_link_efficiency, 0.5, 0.005);
}

// All-reduces with no fixed time at all put the latency on the interval's lower edge (0): a value
// cut there is said in the report and the written section, not passed off as fitted.
TEST(KernelFit, AValueOnTheEdgeOfItsSearchIsSaid) {
  TempDir dir;
  const HardwareSpec base = *find_hardware_preset("h100-sxm");
  gpu_fidelity::ProfileFiles files;
  files.all_reduce = dir.write(
      "all_reduce.csv", network_csv("all_reduce", {2, 4, 8}, 0, 0.0, 450e9 * 0.6 / 1e6,
                                    [](double size, int p) { return 2.0 * (p - 1) / p * size; }));
  const KernelFit fit = fit_kernel_corrections(files, base);
  std::string edge;
  for (const std::string& line : fit.report) {
    if (line.starts_with("hardware.link_latency_us: "))
      edge = line;
  }
  EXPECT_NE(edge.find("is the edge of the interval searched, [0, 200]"), std::string::npos)
      << fmt::format("{}", fmt::join(fit.report, "\n"));
  EXPECT_NE(kernel_corrections_yaml(fit, base.name, files).find("#   " + edge), std::string::npos);
  // The bus bandwidth, inside its interval, is not said to be cut.
  for (const std::string& line : fit.report)
    EXPECT_FALSE(line.starts_with("hardware.link_efficiency: ")) << line;
}

// Files of the network only: the kernel corrections stay the preset's, and the report says so.
TEST(KernelFit, KeepsWhatTheFilesDoNotMeasureAndSaysSo) {
  TempDir dir;
  const HardwareSpec base = *find_hardware_preset("h100-sxm");
  gpu_fidelity::ProfileFiles files;
  files.all_reduce = dir.write(
      "all_reduce.csv", network_csv("all_reduce", {2}, 0, 20.0, 300.0,
                                    [](double size, int p) { return 2.0 * (p - 1) / p * size; }));
  const KernelFit fit = fit_kernel_corrections(files, base);
  EXPECT_EQ(fit.hardware.kernels.min_kernel_ns, base.kernels.min_kernel_ns);
  EXPECT_EQ(fit.hardware.kernels.decode_attention_floor_ns, base.kernels.decode_attention_floor_ns);
  EXPECT_EQ(fit.hardware.interconnect.send_latency, base.interconnect.send_latency);
  bool said = false;
  for (const std::string& line : fit.report)
    said = said || line.starts_with("GEMMs and element-wise ops: not measured");
  EXPECT_TRUE(said) << fmt::format("{}", fmt::join(fit.report, "\n"));
  const std::string yaml = kernel_corrections_yaml(fit, base.name, files);
  EXPECT_NE(yaml.find("hardware:\n  preset: h100-sxm\n"), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("link_latency_us: 20"), std::string::npos) << yaml;
}

}  // namespace
}  // namespace exitsim::analysis
