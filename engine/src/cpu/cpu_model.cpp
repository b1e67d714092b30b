#include "exitsim/engine/cpu_model.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "exitsim/traces/engine_ops.hpp"

namespace exitsim::engine {
namespace {

// Linear layers in LoRA order (RecursionLora's array).
enum Linear : std::size_t { q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj };

void rms_norm_rows(const Matrix& x, const Eigen::VectorXf& weight, float eps, Matrix& y) {
  y.resize(x.rows(), x.cols());
#pragma omp parallel for schedule(static) if (x.rows() > 1)
  for (Eigen::Index r = 0; r < x.rows(); ++r) {
    const double mean_square =
        x.row(r).cast<double>().squaredNorm() / static_cast<double>(x.cols());
    const auto scale = static_cast<float>(1.0 / std::sqrt(mean_square + double{eps}));
    y.row(r) = (x.row(r) * scale).cwiseProduct(weight.transpose());
  }
}

float silu(float x) {
  return x / (1.0f + std::exp(-x));
}

// Spans of one layer call, all with the call's shape.
class LayerSpans {
 public:
  LayerSpans(const OpProfile& profile, int layer, int recursion, std::span<const LayerRow> rows,
             const KvCache& kv)
      : profiler_(profile.profiler) {
    if (profiler_ != nullptr)
      shape_ = layer_call_shape(layer, recursion, rows, kv, profile.step);
  }
  LayerSpans(profiler::HostProfiler* profiler, const profiler::SpanShape& shape)
      : profiler_(profiler), shape_(shape) {}
  const profiler::SpanShape& shape() const { return shape_; }
  profiler::HostProfiler::Span operator()(std::string_view name, traces::OpKind kind) const {
    return profiler_ == nullptr ? profiler::HostProfiler::Span{}
                                : profiler_->span(name, kind, shape_);
  }

 private:
  profiler::HostProfiler* profiler_;
  profiler::SpanShape shape_;
};

std::vector<RowRange> chunks_of(std::span<const LayerRow> rows) {
  std::vector<RowRange> chunks;
  for (std::size_t r = 0; r < rows.size();) {
    std::size_t end = r + 1;
    if (rows[r].chunk >= 0) {
      while (end < rows.size() && rows[end].chunk == rows[r].chunk)
        ++end;
      chunks.push_back({static_cast<Eigen::Index>(r), static_cast<Eigen::Index>(end)});
    }
    r = end;
  }
  return chunks;
}

// Appends each row's K and V to its write stream (rows without one, and probes, keep none).
void store_kv(std::span<const LayerRow> rows, const Matrix& k, const Matrix& v, KvCache& kv) {
  const auto width = static_cast<std::size_t>(k.cols());
  for (std::size_t r = 0; r < rows.size(); ++r) {
    if (rows[r].write_stream < 0 || rows[r].probe)
      continue;
    const auto i = static_cast<Eigen::Index>(r);
    kv.append(rows[r].write_stream, rows[r].position, {k.row(i).data(), width},
              {v.row(i).data(), width});
  }
}

}  // namespace

CpuModel::CpuModel(const ModelConfig& config, const ModelWeights& weights)
    : config_(config),
      weights_(weights),
      inv_freq_(rotary_inv_freq(config.shape.head_dim, config.rope_theta, config.rope_scaling)) {}

LayerSource CpuModel::source_of(int executed_layer) const {
  return layer_source(depth(), executed_layer);
}

std::unique_ptr<HiddenStates> CpuModel::make_states() const {
  return std::make_unique<HostStates>(config_.shape.d_model);
}

void CpuModel::embed(std::span<const std::int32_t> tokens, HiddenStates& states,
                     std::span<const StateSlot> into) const {
  states.write(into, embed_rows(weights_.embedding, tokens));
}

void CpuModel::adapters_of(int layer, std::span<const LayerRow> rows,
                           std::vector<const LoraSet*>& out) const {
  out.assign(rows.size(), nullptr);
  const LayerSource source = source_of(layer);
  if (weights_.lora.empty() || source.recursion == 0)
    return;
  const auto j = static_cast<std::size_t>(source.unique_layer - depth().prelude_layers);
  for (std::size_t r = 0; r < rows.size(); ++r) {
    const int recursion = rows[r].recursion >= 1 ? rows[r].recursion : source.recursion;
    const auto& per_layer = weights_.lora[static_cast<std::size_t>(recursion - 1)].layers;
    if (j < per_layer.size())
      out[r] = &per_layer[j];
  }
}

void CpuModel::project(const Matrix& w, std::span<const LoraSet* const> adapters,
                       std::size_t linear, std::span<const RowRange> chunks, const Matrix& x,
                       Matrix& y) const {
  linear_rows(w, x, chunks, y);
  if (adapters.empty())
    return;
  for (Eigen::Index r = 0; r < x.rows(); ++r) {
    const LoraSet* set = adapters[static_cast<std::size_t>(r)];
    if (set != nullptr && (*set)[linear].a.rows() > 0) {
      const LinearLora& lora = (*set)[linear];
      const Eigen::VectorXf down = lora.a * x.row(r).transpose();
      y.row(r).noalias() += (lora.b * down).transpose();
    }
  }
}

void CpuModel::rotate(Matrix& m, std::int64_t heads, std::span<const LayerRow> rows) const {
  std::vector<std::int32_t> positions(rows.size());
  for (std::size_t r = 0; r < rows.size(); ++r)
    positions[r] = rows[r].position;
  rotate_rows(m.data(), m.rows(), m.cols(), heads, config_.shape.head_dim, inv_freq_, positions);
}

void CpuModel::attend(const Matrix& q, const Matrix& k, const Matrix& v,
                      std::span<const LayerRow> rows, const KvCache& kv, Matrix& out) const {
  std::vector<AttentionQuery> queries(rows.size());
  for (std::size_t r = 0; r < rows.size(); ++r)
    queries[r] = {rows[r].position, rows[r].read_stream, rows[r].probe};
  const ModelShape& s = config_.shape;
  out.resize(q.rows(), s.n_heads * s.head_dim);
  attend_rows(q.data(), q.cols(), k.data(), v.data(), k.cols(), queries, kv,
              {s.n_heads, s.n_kv_heads, s.head_dim}, out.data());
}

void CpuModel::layer(int layer, HiddenStates& states, std::span<const StateSlot> slots,
                     std::span<const LayerRow> rows, KvCache& kv, const OpProfile& profile) const {
  if (rows.empty())
    return;
  const LayerSpans spans(profile, layer, source_of(layer).recursion, rows, kv);
  // Gathering the call's rows (the tokens still running at this depth, pending states joining)
  // and scattering them back is the compaction that exits cost.
  Matrix x;
  {
    auto timed = spans(traces::engine_ops::compaction, traces::OpKind::memcpy);
    x = states.read(slots);
  }
  layer_rows(layer, x, rows, kv, profile.profiler, spans.shape());
  auto timed = spans(traces::engine_ops::compaction, traces::OpKind::memcpy);
  states.write(slots, x);
}

void CpuModel::layer_rows(int layer, Matrix& x, std::span<const LayerRow> rows, KvCache& kv,
                          profiler::HostProfiler* profiler,
                          const profiler::SpanShape& shape) const {
  const LayerSource source = source_of(layer);
  const LayerWeights& w = weights_.layers[static_cast<std::size_t>(source.unique_layer)];
  std::vector<const LoraSet*> adapters;
  adapters_of(layer, rows, adapters);
  const LayerSpans spans(profiler, shape);
  const std::vector<RowRange> chunks = chunks_of(rows);
  using traces::OpKind;

  Matrix h, q, k, v;
  {
    auto timed = spans(traces::engine_ops::attn_norm, OpKind::norm);
    rms_norm_rows(x, w.attn_norm, config_.rms_eps, h);
  }
  {
    auto timed = spans(traces::engine_ops::qkv_proj, OpKind::gemm);
    project(w.wq, adapters, q_proj, chunks, h, q);
    project(w.wk, adapters, k_proj, chunks, h, k);
    project(w.wv, adapters, v_proj, chunks, h, v);
  }
  {
    auto timed = spans(traces::engine_ops::rotary, OpKind::elementwise);
    rotate(q, config_.shape.n_heads, rows);
    rotate(k, config_.shape.n_kv_heads, rows);
  }
  {
    auto timed = spans(traces::engine_ops::kv_write, OpKind::memcpy);
    store_kv(rows, k, v, kv);
  }
  Matrix attention, projected;
  {
    auto timed = spans(traces::engine_ops::attention, OpKind::attention);
    attend(q, k, v, rows, kv, attention);
  }
  {
    auto timed = spans(traces::engine_ops::o_proj, OpKind::gemm);
    project(w.wo, adapters, o_proj, chunks, attention, projected);
    x += projected;
  }
  Matrix gate, up, hidden;
  {
    auto timed = spans(traces::engine_ops::mlp_norm, OpKind::norm);
    rms_norm_rows(x, w.mlp_norm, config_.rms_eps, h);
  }
  {
    auto timed = spans(traces::engine_ops::mlp_gate_up, OpKind::gemm);
    project(w.w_gate, adapters, gate_proj, chunks, h, gate);
    project(w.w_up, adapters, up_proj, chunks, h, up);
  }
  {
    auto timed = spans(traces::engine_ops::mlp_act, OpKind::elementwise);
    hidden = gate.unaryExpr(&silu).cwiseProduct(up);
  }
  {
    auto timed = spans(traces::engine_ops::mlp_down, OpKind::gemm);
    project(w.w_down, adapters, down_proj, chunks, hidden, projected);
    x += projected;
  }
}

void CpuModel::kv_only(int layer, const HiddenStates& states, std::span<const StateSlot> slots,
                       std::span<const LayerRow> rows, KvCache& kv,
                       const OpProfile& profile) const {
  if (rows.empty())
    return;
  const LayerSource source = source_of(layer);
  const LayerWeights& w = weights_.layers[static_cast<std::size_t>(source.unique_layer)];
  std::vector<const LoraSet*> adapters;
  adapters_of(layer, rows, adapters);
  const LayerSpans spans(profile, layer, source.recursion, rows, kv);
  const std::vector<RowRange> chunks = chunks_of(rows);
  auto timed = spans(traces::engine_ops::kv_only, traces::OpKind::gemm);
  const Matrix x = states.read(slots);
  Matrix h, k, v;
  rms_norm_rows(x, w.attn_norm, config_.rms_eps, h);
  project(w.wk, adapters, k_proj, chunks, h, k);
  project(w.wv, adapters, v_proj, chunks, h, v);
  rotate(k, config_.shape.n_kv_heads, rows);
  store_kv(rows, k, v, kv);
}

Matrix CpuModel::logits(const HiddenStates& states, std::span<const StateSlot> slots) const {
  const Matrix x = states.read(slots);
  Matrix h, out;
  rms_norm_rows(x, weights_.final_norm, config_.rms_eps, h);
  linear_rows(weights_.lm_head, h, {}, out);
  return out;
}

std::vector<Top2Confidence> CpuModel::top2(const HiddenStates& states,
                                           std::span<const StateSlot> slots,
                                           bool probabilities) const {
  const Matrix all = logits(states, slots);
  std::vector<Top2Confidence> out;
  out.reserve(slots.size());
  for (Eigen::Index r = 0; r < all.rows(); ++r) {
    out.push_back(
        head_summary({all.row(r).data(), static_cast<std::size_t>(all.cols())}, probabilities));
  }
  return out;
}

std::vector<double> CpuModel::router_scores(int recursion, const HiddenStates& states,
                                            std::span<const StateSlot> slots) const {
  const Matrix x = states.read(slots);
  const Router& router = weights_.routers.at(static_cast<std::size_t>(recursion - 1));
  std::vector<double> scores(static_cast<std::size_t>(x.rows()));
  for (Eigen::Index r = 0; r < x.rows(); ++r) {
    const double logit = double{x.row(r).dot(router.weight.transpose())} + double{router.bias};
    scores[static_cast<std::size_t>(r)] = 1.0 / (1.0 + std::exp(-logit));
  }
  return scores;
}

}  // namespace exitsim::engine
