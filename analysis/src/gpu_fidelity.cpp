// exitsim's roofline prices against Vidur's per-op GPU measurements and published figures.
#include "exitsim/analysis/gpu_fidelity.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <stdexcept>
#include <tuple>
#include <utility>

#include "exitsim/analysis/vidur.hpp"
#include "exitsim/core/hardware.hpp"
#include "exitsim/core/model_shape.hpp"
#include "exitsim/core/parallel.hpp"
#include "exitsim/core/presets.hpp"
#include "exitsim/sim/cost/roofline.hpp"

namespace exitsim::analysis::gpu_fidelity {
namespace {

namespace fs = std::filesystem;
using sim::BatchEntry;
using sim::OpCost;
using sim::OpKind;
using sim::RooflineCostModel;

HardwareSpec hardware_of(Gpu gpu) {
  const std::optional<HardwareSpec> hw = find_hardware_preset(hardware_preset(gpu));
  if (!hw)
    throw std::logic_error("gpu_fidelity: no hardware preset " + std::string(hardware_preset(gpu)));
  return *hw;
}

// A plain model of `layers` layers (bf16); head_dim = d_model / heads.
ModelShape model_of(std::string name, std::int64_t d_model, std::int64_t heads,
                    std::int64_t kv_heads, std::int64_t ffn, std::int64_t vocab, bool gated,
                    int layers = 1) {
  ModelShape m;
  m.name = std::move(name);
  m.d_model = d_model;
  m.n_heads = heads;
  m.n_kv_heads = kv_heads;
  m.head_dim = d_model / heads;
  m.ffn_dim = ffn;
  m.vocab = vocab;
  m.dtype = DType::bf16;
  m.mlp = gated ? MlpKind::gated : MlpKind::plain;
  m.depth = DepthStructure::plain(layers);
  return m;
}

ModelShape model_of(const std::string& name, const vidur::ModelColumns& c) {
  return model_of(name, c.n_embd, c.n_head, c.n_kv_head, c.n_expanded_embd, c.vocab_size, c.gated);
}

// A cost model at the default efficiencies, one GPU of a `tp`-way group.
std::unique_ptr<RooflineCostModel> cost_model(const ModelShape& model, const HardwareSpec& hw,
                                              int tp, int pp = 1) {
  return std::make_unique<RooflineCostModel>(model, hw, sim::RooflineEfficiency{},
                                             ParallelSpec{tp, pp});
}

BatchEntry entry(std::int64_t query, std::int64_t context, int depth) {
  BatchEntry e;
  e.query_tokens = query;
  e.context_tokens = context;
  e.depth = depth;
  e.emits_token = true;
  return e;
}

// Vidur's mlp.csv batches: one prefill entry of T tokens; one token is a decode at context 1.
std::vector<BatchEntry> token_batch(std::int64_t tokens, int depth) {
  return {tokens == 1 ? entry(1, 1, depth) : entry(tokens, 0, depth)};
}

std::vector<BatchEntry> decode_batch(std::int64_t sequences, std::int64_t context, int depth) {
  return std::vector<BatchEntry>(static_cast<std::size_t>(sequences), entry(1, context, depth));
}

double kernel_us(const OpCost& op) {
  return (op.duration_ns - op.launch_ns) / 1000.0;
}

// The first launched op `kind` of layer 0: its kernel time in microseconds (0 when absent).
double layer0_kernel_us(const std::vector<OpCost>& ops, OpKind kind) {
  for (const OpCost& op : ops) {
    if (op.layer == 0 && op.kind == kind && op.launched)
      return kernel_us(op);
  }
  return 0;
}

// Every launched op of layer 0, kernel times summed.
double layer0_sum_us(const std::vector<OpCost>& ops) {
  double sum = 0;
  for (const OpCost& op : ops) {
    if (op.layer == 0 && op.launched)
      sum += kernel_us(op);
  }
  return sum;
}

using vidur::Mean;

// One file's mlp.csv medians averaged per (TP, tokens, op).
using MlpKey = std::tuple<int, std::int64_t, std::string>;
std::map<MlpKey, Mean> mlp_medians(const vidur::MlpProfile& profile) {
  std::map<MlpKey, Mean> out;
  for (const vidur::ComputeTime& t : profile.times)
    out[{t.tensor_parallel, t.tokens, t.op}].add(t.median_us);
  return out;
}

struct OpMapping {
  const char* vidur;
  const char* vidur_add;  // timed apart and added (the residual add), or nullptr
  OpKind kind;
  Family family;
};
constexpr std::array<OpMapping, 7> k_mlp_ops = {{
    {"attn_pre_proj", nullptr, OpKind::qkv_projection, Family::gemm},
    {"attn_post_proj", nullptr, OpKind::output_projection, Family::gemm},
    {"mlp_up_proj", nullptr, OpKind::mlp_gate_up, Family::gemm},
    {"mlp_down_proj", nullptr, OpKind::mlp_down, Family::gemm},
    {"input_layernorm", "add", OpKind::input_norm, Family::elementwise},
    {"post_attention_layernorm", "add", OpKind::post_attention_norm, Family::elementwise},
    {"mlp_act", nullptr, OpKind::mlp_activation, Family::elementwise},
}};

std::string tp_setting(int tp) {
  return fmt::format("TP {}", tp);
}

bool selected(const Selection& s, Family f) {
  return !s.family || *s.family == f;
}

void compare_mlp(const fs::path& path, Gpu gpu, const HardwareSpec& hw,
                 const std::string& model_name, const Selection& selection, Comparison& out) {
  const vidur::MlpProfile profile = vidur::read_mlp(path.string());
  const ModelShape model = model_of(model_name, profile.model);
  const std::map<MlpKey, Mean> medians = mlp_medians(profile);
  std::map<int, std::unique_ptr<RooflineCostModel>> models;
  // Keys in order: by TP, then tokens, then op; one op_breakdown per (TP, tokens).
  std::pair<int, std::int64_t> priced{-1, -1};
  std::vector<OpCost> ops;
  for (const auto& [key, mean] : medians) {
    const auto& [tp, tokens, op_name] = key;
    for (const OpMapping& m : k_mlp_ops) {
      if (op_name != m.vidur || !selected(selection, m.family))
        continue;
      double real = mean.value();
      if (m.vidur_add != nullptr) {
        const auto add = medians.find({tp, tokens, m.vidur_add});
        if (add == medians.end())
          continue;
        real += add->second.value();
      }
      if (priced != std::pair{tp, tokens}) {
        auto& cm = models[tp];
        if (!cm)
          cm = cost_model(model, hw, tp);
        ops = cm->op_breakdown(token_batch(tokens, model.depth.stacked_depth()));
        priced = {tp, tokens};
      }
      out.points.push_back({m.family, gpu, tp, tp_setting(tp), std::string(sim::to_string(m.kind)),
                            fmt::format("{} T={}", model_name, tokens), path.filename().string(),
                            real, layer0_kernel_us(ops, m.kind)});
    }
  }
}

// Attention rows averaged per grid point: (prefill, TP, q heads, K/V heads, n_embd, batch,
// chunk, kv_cache).
using AttentionKey = std::tuple<bool, int, int, int, int, std::int64_t, std::int64_t, std::int64_t>;

double attention_real_us(const vidur::AttentionTime& t) {
  return t.median_us + t.reshape_us + t.kv_save_us;
}

void compare_attention(const fs::path& path, Gpu gpu, const HardwareSpec& hw,
                       const Selection& selection, Comparison& out) {
  const bool want_decode = selected(selection, Family::decode_attention);
  const bool want_prefill = selected(selection, Family::prefill_attention);
  std::map<AttentionKey, Mean> rows;
  for (const vidur::AttentionTime& t : vidur::read_attention(path.string())) {
    if (t.prefill ? !want_prefill : !want_decode)
      continue;
    rows[{t.prefill, t.tensor_parallel, t.n_q_head, t.n_kv_head, t.n_embd, t.batch_size,
          t.prefill_chunk, t.kv_cache}]
        .add(attention_real_us(t));
  }
  std::map<std::tuple<int, int, int, int>, std::unique_ptr<RooflineCostModel>> models;
  for (const auto& [key, mean] : rows) {
    const auto& [prefill, tp, heads, kv_heads, n_embd, batch, chunk, kv] = key;
    // The attention ops read neither the MLP's width nor the vocabulary.
    auto& cm = models[{tp, heads, kv_heads, n_embd}];
    if (!cm) {
      cm = cost_model(
          model_of("attention", n_embd, heads, kv_heads, 4 * std::int64_t{n_embd}, 32000, true), hw,
          tp);
    }
    const std::vector<BatchEntry> entries =
        prefill ? std::vector<BatchEntry>{entry(chunk, kv, 1)} : decode_batch(batch, kv, 1);
    const std::vector<OpCost> ops = cm->op_breakdown(entries);
    const OpKind kind = prefill ? OpKind::attention_prefill : OpKind::attention_decode;
    out.points.push_back(
        {prefill ? Family::prefill_attention : Family::decode_attention, gpu, tp, tp_setting(tp),
         std::string(sim::to_string(kind)),
         prefill ? fmt::format("P={} C={}", chunk, kv) : fmt::format("B={} C={}", batch, kv),
         path.filename().string(), mean.value(), layer0_kernel_us(ops, kind)});
  }
}

// The collectives' stand-in model: 512 wide, so that a token is 1024 bytes of activations (an
// all-reduce's buffer) and a hand-off 2048 bytes (hidden state and residual); 8 heads of 64 split
// over any TP degree of a node.
constexpr std::int64_t k_collective_width = 512;
ModelShape collective_model(int layers) {
  return model_of("collective-512", k_collective_width, 8, 8, 4 * k_collective_width, 32000, true,
                  layers);
}

using NetworkKey = std::tuple<int, int, std::int64_t>;  // workers, devices_per_node, size
std::map<NetworkKey, Mean> network_medians(const fs::path& path, const std::string& collective) {
  std::map<NetworkKey, Mean> out;
  for (const vidur::NetworkTime& t : vidur::read_network(path.string())) {
    if (t.collective == collective)
      out[{t.workers, t.devices_per_node, t.size_bytes}].add(t.median_us);
  }
  return out;
}

void compare_all_reduce(const fs::path& path, Gpu gpu, const HardwareSpec& hw, Comparison& out) {
  const ModelShape model = collective_model(1);
  const std::int64_t token_bytes = k_collective_width * 2;
  std::map<int, std::unique_ptr<RooflineCostModel>> models;
  std::size_t other_nodes = 0;
  std::size_t partial_tokens = 0;
  for (const auto& [key, mean] : network_medians(path, "all_reduce")) {
    const auto& [workers, per_node, size] = key;
    if (per_node != workers || workers < 2 || workers > hw.interconnect.gpus_per_node) {
      ++other_nodes;
      continue;
    }
    if (size % token_bytes != 0) {
      ++partial_tokens;
      continue;
    }
    auto& cm = models[workers];
    if (!cm)
      cm = cost_model(model, hw, workers);
    const std::vector<OpCost> ops = cm->op_breakdown(token_batch(size / token_bytes, 1));
    out.points.push_back({Family::all_reduce, gpu, workers, tp_setting(workers),
                          std::string(sim::to_string(OpKind::tp_all_reduce)),
                          fmt::format("S={} B", size), path.filename().string(), mean.value(),
                          layer0_kernel_us(ops, OpKind::tp_all_reduce)});
  }
  if (other_nodes > 0) {
    out.notes.push_back(fmt::format(
        "{}: {} grid points over more than one node (devices_per_node < workers) left out: "
        "exitsim's TP stays in one node",
        path.filename().string(), other_nodes));
  }
  if (partial_tokens > 0) {
    out.notes.push_back(fmt::format("{}: {} sizes not a whole number of {}-byte tokens left out",
                                    path.filename().string(), partial_tokens, token_bytes));
  }
}

void compare_send_recv(const fs::path& path, Gpu gpu, const HardwareSpec& spec, Comparison& out) {
  const std::int64_t token_bytes = k_collective_width * 2 * 2;
  const ModelShape model = collective_model(2);
  const int depth = model.depth.stacked_depth();
  // One PP 1 and one PP 2 replica per placement: in one node, or each stage on its own node.
  struct Replicas {
    std::unique_ptr<RooflineCostModel> one, two;
  };
  std::map<int, Replicas> by_per_node;
  std::size_t left_out = 0;
  for (const auto& [key, mean] : network_medians(path, "send_recv")) {
    const auto& [workers, per_node, size] = key;
    if (workers != 2 || (per_node != 1 && per_node != 2) || size % token_bytes != 0) {
      ++left_out;
      continue;
    }
    Replicas& r = by_per_node[per_node];
    if (!r.one) {
      HardwareSpec hw = spec;
      if (per_node == 1)
        hw.interconnect.gpus_per_node = 1;
      r.one = cost_model(model, hw, 1, 1);
      r.two = cost_model(model, hw, 1, 2);
    }
    const std::vector<BatchEntry> batch = token_batch(size / token_bytes, depth);
    const sim::IterationCost one = r.one->iteration_cost(batch);
    const sim::IterationCost two = r.two->iteration_cost(batch);
    const double hand_off_ns =
        static_cast<double>((two.total - one.total) - (two.overhead - one.overhead));
    out.points.push_back({Family::send_recv, gpu, 1, per_node == 1 ? "2 nodes" : "1 node",
                          "pipeline_hand_off", fmt::format("S={} B", size),
                          path.filename().string(), mean.value(), hand_off_ns / 1000.0});
  }
  if (left_out > 0) {
    out.notes.push_back(fmt::format(
        "{}: {} grid points left out (not 2 workers, or not a whole number of {}-byte tokens)",
        path.filename().string(), left_out, token_bytes));
  }
}

std::optional<Gpu> gpu_of_prefix(std::string_view name) {
  if (name.starts_with("a100_"))
    return Gpu::a100;
  if (name.starts_with("h100_"))
    return Gpu::h100;
  return std::nullopt;
}

bool wants(const Selection& s, Gpu gpu, std::initializer_list<Family> families) {
  if (s.gpu && *s.gpu != gpu)
    return false;
  if (!s.family)
    return true;
  return std::find(families.begin(), families.end(), *s.family) != families.end();
}

// Linear interpolation between order statistics of sorted values (numpy's default).
double percentile(const std::vector<double>& sorted, double q) {
  if (sorted.empty())
    return std::numeric_limits<double>::quiet_NaN();
  const double pos = q * static_cast<double>(sorted.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(pos));
  const std::size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - static_cast<double>(lo));
}

// Vidur's one-node all-reduce medians of `workers` GPUs by size, for interpolation.
std::vector<std::pair<double, double>> all_reduce_curve(const fs::path& path, int workers) {
  std::vector<std::pair<double, double>> curve;
  for (const auto& [key, mean] : network_medians(path, "all_reduce")) {
    const auto& [w, per_node, size] = key;
    if (w == workers && per_node == workers)
      curve.emplace_back(static_cast<double>(size), mean.value());
  }
  return curve;  // ascending sizes (map order)
}

double interpolate(const std::vector<std::pair<double, double>>& curve, double x) {
  if (curve.empty())
    return std::numeric_limits<double>::quiet_NaN();
  if (x <= curve.front().first)
    return curve.front().second;
  for (std::size_t i = 1; i < curve.size(); ++i) {
    if (x <= curve[i].first) {
      const auto& [x0, y0] = curve[i - 1];
      const auto& [x1, y1] = curve[i];
      return y0 + (y1 - y0) * (x - x0) / (x1 - x0);
    }
  }
  return curve.back().second;
}

// Every op of Vidur's layer at T tokens and TP `tp` but the embedding, the add twice; NaN when
// the grid lacks the point.
double vidur_layer_ops_us(const std::map<MlpKey, Mean>& medians, int tp, std::int64_t tokens) {
  double sum = 0;
  bool any = false;
  for (auto it = medians.lower_bound({tp, tokens, ""});
       it != medians.end() && std::get<0>(it->first) == tp && std::get<1>(it->first) == tokens;
       ++it) {
    const std::string& op = std::get<2>(it->first);
    if (op == "emb")
      continue;
    sum += (op == "add" ? 2 : 1) * it->second.value();
    any = true;
  }
  return any ? sum : std::numeric_limits<double>::quiet_NaN();
}

double exitsim_decode_layer_us(const RooflineCostModel& cm, std::int64_t batch,
                               std::int64_t context) {
  return layer0_sum_us(cm.op_breakdown(decode_batch(batch, context, 1)));
}

}  // namespace

std::string_view to_string(Gpu gpu) {
  return gpu == Gpu::a100 ? "a100" : "h100";
}

std::string_view hardware_preset(Gpu gpu) {
  return gpu == Gpu::a100 ? "a100-80gb" : "h100-sxm";
}

std::string_view to_string(Family family) {
  switch (family) {
    case Family::gemm:
      return "gemm";
    case Family::elementwise:
      return "elementwise";
    case Family::decode_attention:
      return "decode_attention";
    case Family::prefill_attention:
      return "prefill_attention";
    case Family::all_reduce:
      return "all_reduce";
    case Family::send_recv:
      return "send_recv";
  }
  return "?";
}

Comparison compare_vidur(const std::string& gpu_dir, const Selection& selection) {
  Comparison out;
  const fs::path dir = fs::path(gpu_dir) / "vidur";
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    out.notes.push_back(dir.string() + ": not a directory, nothing compared");
    return out;
  }
  std::vector<fs::path> files;
  for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
    if (e.is_regular_file() && e.path().extension() == ".csv")
      files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  for (const fs::path& path : files) {
    const std::string name = path.filename().string();
    const std::optional<Gpu> gpu = gpu_of_prefix(name);
    if (!gpu) {
      out.notes.push_back(name + ": not an a100_ or h100_ file, left out");
      continue;
    }
    const HardwareSpec hw = hardware_of(*gpu);
    constexpr std::string_view mlp_suffix = "_mlp.csv";
    if (name.ends_with(mlp_suffix)) {
      if (wants(selection, *gpu, {Family::gemm, Family::elementwise})) {
        compare_mlp(path, *gpu, hw, name.substr(5, name.size() - 5 - mlp_suffix.size()), selection,
                    out);
      }
    } else if (name.find("attention") != std::string::npos) {
      if (wants(selection, *gpu, {Family::decode_attention, Family::prefill_attention}))
        compare_attention(path, *gpu, hw, selection, out);
    } else if (name.ends_with("_dgx_all_reduce.csv")) {
      if (wants(selection, *gpu, {Family::all_reduce}))
        compare_all_reduce(path, *gpu, hw, out);
    } else if (name.ends_with("_dgx_send_recv.csv")) {
      if (wants(selection, *gpu, {Family::send_recv}))
        compare_send_recv(path, *gpu, hw, out);
    } else if (name.find("pairwise") != std::string::npos) {
      if (!selection.gpu && !selection.family) {
        out.notes.push_back(name +
                            ": a pairwise-NVLink machine (PCIe boards with NVLink bridges), not "
                            "the SXM preset; left out");
      }
    } else if (!selection.gpu && !selection.family) {
      out.notes.push_back(name + ": no exitsim op to compare (host overheads); left out");
    }
  }
  return out;
}

Comparison compare_profile(const ProfileFiles& files, const HardwareSpec& hardware, Gpu label,
                           const Selection& selection) {
  Comparison out;
  const auto wanted = [&](std::initializer_list<Family> families) {
    return !selection.family ||
           std::find(families.begin(), families.end(), *selection.family) != families.end();
  };
  if (wanted({Family::gemm, Family::elementwise})) {
    for (const std::string& mlp : files.mlp)
      compare_mlp(mlp, label, hardware, fs::path(mlp).stem().string(), selection, out);
  }
  if (wanted({Family::decode_attention, Family::prefill_attention})) {
    for (const std::string& attention : files.attention)
      compare_attention(attention, label, hardware, selection, out);
  }
  if (!files.all_reduce.empty() && wanted({Family::all_reduce}))
    compare_all_reduce(files.all_reduce, label, hardware, out);
  if (!files.send_recv.empty() && wanted({Family::send_recv}))
    compare_send_recv(files.send_recv, label, hardware, out);
  return out;
}

bool RatioSummary::meets_family_target() const {
  return n > 0 && median >= k_median_low && median <= k_median_high &&
         share_within_band() >= k_band_share;
}

std::string RatioSummary::describe() const {
  return fmt::format(
      "n {}, median {:.3f}, p10-p90 {:.3f}-{:.3f}, min-max {:.3f}-{:.3f}, "
      "{:.0f}% in {:.2f}-{:.2f}",
      n, median, p10, p90, min, max, 100 * share_within_band(), k_band_low, k_band_high);
}

RatioSummary summarize(std::span<const double> ratios) {
  std::vector<double> sorted(ratios.begin(), ratios.end());
  std::sort(sorted.begin(), sorted.end());
  RatioSummary s;
  s.n = sorted.size();
  s.median = percentile(sorted, 0.5);
  s.p10 = percentile(sorted, 0.1);
  s.p90 = percentile(sorted, 0.9);
  s.min = sorted.empty() ? std::numeric_limits<double>::quiet_NaN() : sorted.front();
  s.max = sorted.empty() ? std::numeric_limits<double>::quiet_NaN() : sorted.back();
  s.within_band = static_cast<std::size_t>(std::count_if(
      sorted.begin(), sorted.end(), [](double r) { return r >= k_band_low && r <= k_band_high; }));
  return s;
}

std::vector<double> ratios_of(std::span<const Point> points) {
  std::vector<double> out;
  out.reserve(points.size());
  for (const Point& p : points)
    out.push_back(p.ratio());
  return out;
}

std::vector<LayerPoint> decode_layer_llama2_70b(const std::string& gpu_dir) {
  const fs::path dir = fs::path(gpu_dir) / "vidur";
  const fs::path mlp = dir / "a100_Llama-2-70b-hf_mlp.csv";
  const fs::path attention = dir / "a100_old_attention_70b_tp2.csv";
  const fs::path network = dir / "a100_dgx_all_reduce.csv";
  std::error_code ec;
  if (!fs::exists(mlp, ec) || !fs::exists(attention, ec) || !fs::exists(network, ec))
    return {};
  const vidur::MlpProfile profile = vidur::read_mlp(mlp.string());
  const std::map<MlpKey, Mean> medians = mlp_medians(profile);
  // The TP 2 decode grid: (batch, context) -> attention time.
  std::map<std::pair<std::int64_t, std::int64_t>, Mean> grid;
  for (const vidur::AttentionTime& t : vidur::read_attention(attention.string())) {
    if (!t.prefill && t.tensor_parallel == 2)
      grid[{t.batch_size, t.kv_cache}].add(attention_real_us(t));
  }
  const ModelShape model = model_of("Llama-2-70B", profile.model);
  const HardwareSpec hw = hardware_of(Gpu::a100);
  std::vector<LayerPoint> out;
  for (const int tp : {2, 4, 8}) {
    const auto cm = cost_model(model, hw, tp);
    const std::vector<std::pair<double, double>> curve = all_reduce_curve(network, tp);
    const std::int64_t per_grid = tp / 2;  // TP t at B sequences ~ the TP 2 grid at B / (t / 2)
    for (const std::int64_t context : k_layer_contexts) {
      for (const std::int64_t batch : k_layer_batches) {
        if (batch % per_grid != 0)
          continue;
        const auto cell = grid.find({batch / per_grid, context});
        const double ops = vidur_layer_ops_us(medians, tp, batch);
        if (cell == grid.end() || std::isnan(ops) || curve.empty())
          continue;
        const double all_reduce = interpolate(
            curve, static_cast<double>(batch * profile.model.n_embd * 2));  // fp16 activations
        LayerPoint p;
        p.model = "Llama-2-70B";
        p.gpu = Gpu::a100;
        p.tensor_parallel = tp;
        p.batch = batch;
        p.context = context;
        p.attention_us = cell->second.value();
        p.attention_source =
            fmt::format("{} at B={}", attention.filename().string(), batch / per_grid);
        p.real_us = ops + p.attention_us + 2 * all_reduce;
        p.exitsim_us = exitsim_decode_layer_us(*cm, batch, context);
        out.push_back(std::move(p));
      }
    }
  }
  return out;
}

std::vector<LayerPoint> decode_layer_llama2_7b(const std::string& gpu_dir) {
  const fs::path mlp = fs::path(gpu_dir) / "vidur" / "a100_Llama-2-7b-hf_mlp.csv";
  std::error_code ec;
  if (!fs::exists(mlp, ec))
    return {};
  const vidur::MlpProfile profile = vidur::read_mlp(mlp.string());
  const std::map<MlpKey, Mean> medians = mlp_medians(profile);
  const auto cm = cost_model(model_of("Llama-2-7B", profile.model), hardware_of(Gpu::a100), 1);
  std::vector<LayerPoint> out;
  for (const CitedAttention& a : k_vidur_llama2_7b_a100_decode_attention) {
    const double ops = vidur_layer_ops_us(medians, 1, a.batch);
    if (std::isnan(ops))
      continue;
    LayerPoint p;
    p.model = "Llama-2-7B";
    p.gpu = Gpu::a100;
    p.tensor_parallel = 1;
    p.batch = a.batch;
    p.context = a.context;
    p.attention_us = a.us;
    p.attention_source = "Vidur's A100 Llama-2-7B attention.csv, cited";
    p.real_us = ops + a.us;
    p.exitsim_us = exitsim_decode_layer_us(*cm, a.batch, a.context);
    out.push_back(std::move(p));
  }
  return out;
}

std::vector<TtftPoint> ttft_tensorrt_llm() {
  const HardwareSpec hw = hardware_of(Gpu::a100);
  std::vector<TtftPoint> out;
  for (const TtftFigure& f : k_tensorrt_llm_ttft) {
    ModelShape model;
    if (std::string_view(f.model) == "Llama-2-7B") {
      model = *find_model_preset("llama-2-7b");
    } else {
      model = *find_model_preset("llama-3.1-70b");
      model.name = "llama-2-70b";
      model.vocab = 32000;
      model.max_context = 4096;
    }
    const auto cm = cost_model(model, hw, f.tensor_parallel);
    const std::vector<BatchEntry> batch = {entry(f.prompt_tokens, 0, model.depth.stacked_depth())};
    out.push_back({f, to_milliseconds(cm->iteration_cost(batch).total)});
  }
  return out;
}

std::vector<FlashAttentionPoint> flash_attention_h100() {
  constexpr std::int64_t tokens = 16384, heads = 16, head_dim = 128;
  const auto cm = cost_model(
      model_of("fa-bench", heads * head_dim, heads, heads, 4 * heads * head_dim, 32000, true),
      hardware_of(Gpu::h100), 1);
  std::vector<FlashAttentionPoint> out;
  for (const FlashAttentionFigure& f : k_flash_attention_h100) {
    const std::int64_t sequences = tokens / f.seq;
    const std::vector<BatchEntry> batch(static_cast<std::size_t>(sequences), entry(f.seq, 0, 1));
    const std::vector<OpCost> ops = cm->op_breakdown(batch);
    FlashAttentionPoint p;
    p.figure = f;
    const double seq = static_cast<double>(f.seq);
    const double paper_flops =
        4.0 * static_cast<double>(sequences) * seq * seq * heads * head_dim / 2;
    p.real_us = paper_flops / (f.tflops * 1e12) * 1e6;
    for (const OpCost& op : ops) {
      if (op.layer == 0 && op.kind == OpKind::attention_prefill && op.launched) {
        p.exitsim_us = kernel_us(op);
        p.exitsim_tflops = op.flops / (p.exitsim_us * 1e-6) / 1e12;
      }
    }
    out.push_back(p);
  }
  return out;
}

}  // namespace exitsim::analysis::gpu_fidelity
