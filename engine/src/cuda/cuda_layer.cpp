// The GPU backend's layer calls: the CPU model's layer (cpu_model.cpp) op for op, on the device.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <unordered_map>
#include <vector>

#include "cuda/device.hpp"
#include "exitsim/engine/cuda_model.hpp"
#include "exitsim/kernels/attention.hpp"
#include "exitsim/kernels/compaction.hpp"
#include "exitsim/kernels/kv_project.hpp"
#include "exitsim/kernels/kv_write.hpp"
#include "exitsim/kernels/lora.hpp"
#include "exitsim/kernels/rms_norm.hpp"
#include "exitsim/kernels/rotary.hpp"
#include "exitsim/kernels/swiglu.hpp"
#include "exitsim/traces/engine_ops.hpp"

namespace exitsim::engine {
namespace {

namespace ops = traces::engine_ops;
using traces::OpKind;

// Appends a row to each row's write stream, so that the host bookkeeping (and the slots the
// device writes) are settled before the device computes K and V; the values stay on the device
// (sync_kv copies them back). Rows that keep no K/V (probes, shared K/V) get slot -1, which
// kv_write skips.
std::vector<std::int32_t> reserve_rows(std::span<const LayerRow> rows, KvCache& kv) {
  std::vector<std::int32_t> slots(rows.size(), -1);
  for (std::size_t r = 0; r < rows.size(); ++r) {
    if (rows[r].write_stream >= 0 && !rows[r].probe) {
      slots[r] = static_cast<std::int32_t>(kv.append_row(rows[r].write_stream, rows[r].position));
    }
  }
  return slots;
}

// The block tables of the streams the rows read: one table row per distinct stream.
struct Tables {
  std::vector<std::int32_t> flat, stream_rows, row_streams, row_self, positions;
  std::int64_t streams = 0, max_blocks = 1;
};

Tables tables_for(std::span<const LayerRow> rows, const KvCache& kv) {
  Tables t;
  std::unordered_map<int, std::int32_t> index;
  std::vector<int> order;
  for (const LayerRow& row : rows) {
    if (row.read_stream >= 0 && index.try_emplace(row.read_stream, order.size()).second) {
      order.push_back(row.read_stream);
      t.max_blocks = std::max<std::int64_t>(t.max_blocks, kv.blocks_of(row.read_stream));
    }
    t.row_streams.push_back(row.read_stream >= 0 ? index.at(row.read_stream) : -1);
    t.row_self.push_back(row.probe ? 1 : 0);
    t.positions.push_back(row.position);
  }
  t.streams = static_cast<std::int64_t>(order.size());
  t.flat.assign(static_cast<std::size_t>(std::max<std::int64_t>(1, t.streams) * t.max_blocks), 0);
  for (std::size_t s = 0; s < order.size(); ++s) {
    const std::span<const std::int32_t> blocks = kv.blocks(order[s]);
    std::copy(blocks.begin(), blocks.end(),
              t.flat.begin() + static_cast<std::ptrdiff_t>(s) * t.max_blocks);
    t.stream_rows.push_back(static_cast<std::int32_t>(kv.rows(order[s])));
  }
  return t;
}

// Each row's LoRA adapter (its recursion, 0-based) in executed layer `layer`, or -1: rows of a
// depth-wise call name their own recursion.
std::vector<std::int32_t> adapters_of(const LayerSource& source, std::span<const LayerRow> rows) {
  std::vector<std::int32_t> adapter(rows.size(), -1);
  if (source.recursion == 0)
    return adapter;
  for (std::size_t r = 0; r < rows.size(); ++r)
    adapter[r] = (rows[r].recursion >= 1 ? rows[r].recursion : source.recursion) - 1;
  return adapter;
}

// Adds linear `linear`'s per-recursion LoRA of `w` to y (rows y_stride apart) from x.
template <kernels::StorageType T, kernels::StorageType Out>
void add_lora(const CudaModel::Device& d, const LayerOnDevice& w, std::size_t linear,
              int recursions, const std::int32_t* adapter, const T* x, std::int64_t in, Out* y,
              std::int64_t out, std::int64_t rows, std::int64_t x_stride, std::int64_t y_stride) {
  const LoraOnDevice& lora = w.lora[linear];
  if (lora.max_rank == 0 || adapter == nullptr)
    return;
  const std::int32_t* table = lora.table.get();
  kernels::lora_add<T, Out>(x, y,
                            {.a = lora.a.get<T>(),
                             .b = lora.b.get<T>(),
                             .a_offset = table,
                             .b_offset = table + recursions,
                             .rank = table + 2 * recursions,
                             .adapter = adapter},
                            {.rows = rows,
                             .in = in,
                             .out = out,
                             .max_rank = lora.max_rank,
                             .x_stride = x_stride,
                             .y_stride = y_stride},
                            d.stream);
}

}  // namespace

// The calibration features of a call, computed only when something records them: they walk
// every row's K/V stream, which the unprofiled decode step need not pay for.
profiler::SpanShape CudaModel::timed_shape(int layer, int recursion, std::span<const LayerRow> rows,
                                           const KvCache& kv, const OpProfile& profile) const {
  if (tracer_ == nullptr && profile.profiler == nullptr)
    return {};
  return layer_call_shape(layer, recursion, rows, kv, profile.step);
}

void CudaModel::layer(int layer, HiddenStates& states, std::span<const StateSlot> state_slots,
                      std::span<const LayerRow> rows, KvCache& kv, const OpProfile& profile) const {
  const auto n = static_cast<std::int64_t>(rows.size());
  if (n == 0)
    return;
  Device& d = *device_;
  DeviceStates& hidden = on_device(states);
  hidden.check_held(state_slots, n);
  const LayerSource source = source_of(layer);
  const LayerOnDevice& w = d.layers[static_cast<std::size_t>(source.unique_layer)];
  const ModelShape& m = config_.shape;
  const std::int64_t dim = m.d_model;
  const std::int64_t q_dim = m.n_heads * m.head_dim;
  const std::int64_t kv_width = Backend::kv_width();
  const std::int64_t qkv_width = q_dim + 2 * kv_width;
  const std::int64_t ffn = m.ffn_dim;
  const profiler::SpanShape shape = timed_shape(layer, source.recursion, rows, kv, profile);
  const auto op = [&](std::string_view name, OpKind kind) {
    return DeviceOp(d, tracer_, profile, shape, name, kind);
  };
  d.ensure_pool(kv);

  const std::vector<std::int32_t> slots = reserve_rows(rows, kv);
  const Tables t = tables_for(rows, kv);
  CallInts ints;
  const std::size_t positions_part = ints.add(t.positions);
  const std::size_t state_part = ints.add(state_slots);
  const std::size_t slots_part = ints.add(slots);
  const std::size_t tables_part = ints.add(t.flat);
  const std::size_t stream_rows_part = ints.add(t.stream_rows);
  const std::size_t row_streams_part = ints.add(t.row_streams);
  const std::size_t row_self_part = ints.add(t.row_self);
  const std::size_t adapter_part = ints.add(adapters_of(source, rows));
  ints.send(d);
  const std::int32_t* adapter = w.has_lora ? ints.at(adapter_part) : nullptr;
  const int recursions = m.depth.recursions;
  const std::int32_t* positions = ints.at(positions_part);
  const std::int32_t* state_index = ints.at(state_part);
  float* x = d.x.reserve(static_cast<std::size_t>(n * dim));

  {
    // Gathering the call's rows from their slots (and scattering them back at the end) is the
    // compaction that exits cost.
    auto timed = op(ops::compaction, OpKind::memcpy);
    kernels::gather_rows<float>(
        hidden.rows(), x, state_index,
        {.count = n, .width = dim, .src_rows = hidden.capacity(), .dst_rows = n}, d.stream);
  }
  // The matrix products' operands in the storage type; the residual x stays fp32, and the
  // o and down projections accumulate into it in fp32.
  with_storage(d.dtype, [&]<typename T>(std::type_identity<T>) {
    T* h = d.h.reserve<T>(static_cast<std::size_t>(n * dim));
    T* qkv = d.qkv.reserve<T>(static_cast<std::size_t>(n * qkv_width));
    T* attention = d.attention.reserve<T>(static_cast<std::size_t>(n * q_dim));
    T* gate_up = d.gate_up.reserve<T>(static_cast<std::size_t>(n * 2 * ffn));
    T* act = d.act.reserve<T>(static_cast<std::size_t>(n * ffn));
    {
      auto timed = op(ops::attn_norm, OpKind::norm);
      kernels::rms_norm(x, w.attn_norm.get(), h, n, dim, config_.rms_eps, d.stream);
    }
    {
      auto timed = op(ops::qkv_proj, OpKind::gemm);
      kernels::linear<T, T>(d.cublas, h, w.qkv.get<T>(), qkv, {.m = n, .n = qkv_width, .k = dim},
                            false, d.stream);
      add_lora(d, w, 0, recursions, adapter, h, dim, qkv, q_dim, n, 0, qkv_width);
      add_lora(d, w, 1, recursions, adapter, h, dim, qkv + q_dim, kv_width, n, 0, qkv_width);
      add_lora(d, w, 2, recursions, adapter, h, dim, qkv + q_dim + kv_width, kv_width, n, 0,
               qkv_width);
    }
    {
      auto timed = op(ops::rotary, OpKind::elementwise);
      // q and k are adjacent in a q|k|v row and share head_dim: their n_heads + n_kv_heads
      // heads rotate in one launch.
      kernels::rotary<T>(qkv, positions, d.inv_freq.get(),
                         {.rows = n,
                          .heads = m.n_heads + m.n_kv_heads,
                          .head_dim = m.head_dim,
                          .row_stride = qkv_width},
                         d.stream);
    }
    {
      auto timed = op(ops::kv_write, OpKind::memcpy);
      const std::int32_t* device_slots = ints.at(slots_part);
      kernels::kv_write<T>(
          qkv + q_dim, qkv + q_dim + kv_width, device_slots, positions, d.pool.get<T>(),
          d.pool_positions.get(),
          {.rows = n, .k_stride = qkv_width, .v_stride = qkv_width, .pool = d.pool_shape},
          d.stream);
    }
    {
      auto timed = op(ops::attention, OpKind::attention);
      kernels::AttentionArgs<T> args;
      args.q = qkv;
      args.out = attention;
      args.pool = d.pool.get<T>();
      args.pool_positions = d.pool_positions.get();
      args.block_tables = ints.at(tables_part);
      args.stream_rows = ints.at(stream_rows_part);
      args.row_positions = positions;
      args.row_streams = ints.at(row_streams_part);
      args.row_self = ints.at(row_self_part);
      args.self_k = qkv + q_dim;
      args.self_v = qkv + q_dim + kv_width;
      kernels::attention<T>(args,
                            {.rows = n,
                             .n_heads = m.n_heads,
                             .n_kv_heads = m.n_kv_heads,
                             .head_dim = m.head_dim,
                             .q_stride = qkv_width,
                             .self_stride = qkv_width,
                             .streams = t.streams,
                             .max_blocks = t.max_blocks,
                             .pool = d.pool_shape},
                            d.stream);
    }
    {
      auto timed = op(ops::o_proj, OpKind::gemm);
      kernels::linear<T, float>(d.cublas, attention, w.o.get<T>(), x,
                                {.m = n, .n = dim, .k = q_dim}, true, d.stream);
      add_lora(d, w, 3, recursions, adapter, attention, q_dim, x, dim, n, 0, 0);
    }
    {
      auto timed = op(ops::mlp_norm, OpKind::norm);
      kernels::rms_norm(x, w.mlp_norm.get(), h, n, dim, config_.rms_eps, d.stream);
    }
    {
      auto timed = op(ops::mlp_gate_up, OpKind::gemm);
      kernels::linear<T, T>(d.cublas, h, w.gate_up.get<T>(), gate_up,
                            {.m = n, .n = 2 * ffn, .k = dim}, false, d.stream);
      add_lora(d, w, 4, recursions, adapter, h, dim, gate_up, ffn, n, 0, 2 * ffn);
      add_lora(d, w, 5, recursions, adapter, h, dim, gate_up + ffn, ffn, n, 0, 2 * ffn);
    }
    {
      auto timed = op(ops::mlp_act, OpKind::elementwise);
      kernels::swiglu<T>(gate_up, gate_up + ffn, act,
                         {.rows = n, .width = ffn, .in_stride = 2 * ffn}, d.stream);
    }
    {
      auto timed = op(ops::mlp_down, OpKind::gemm);
      kernels::linear<T, float>(d.cublas, act, w.down.get<T>(), x, {.m = n, .n = dim, .k = ffn},
                                true, d.stream);
      add_lora(d, w, 6, recursions, adapter, act, ffn, x, dim, n, 0, 0);
    }
  });
  // No wait for the device: the rows go back to their slots, the K/V stays in the pool.
  auto timed = op(ops::compaction, OpKind::memcpy);
  kernels::scatter_rows<float>(
      x, hidden.rows(), state_index,
      {.count = n, .width = dim, .src_rows = n, .dst_rows = hidden.capacity()}, d.stream);
}

void CudaModel::kv_only(int layer, const HiddenStates& states,
                        std::span<const StateSlot> state_slots, std::span<const LayerRow> rows,
                        KvCache& kv, const OpProfile& profile) const {
  const auto n = static_cast<std::int64_t>(rows.size());
  if (n == 0)
    return;
  Device& d = *device_;
  const DeviceStates& hidden = on_device(states);
  hidden.check_held(state_slots, n);
  const LayerSource source = source_of(layer);
  const LayerOnDevice& w = d.layers[static_cast<std::size_t>(source.unique_layer)];
  const ModelShape& m = config_.shape;
  const std::int64_t kv_width = Backend::kv_width();
  d.ensure_pool(kv);
  const profiler::SpanShape shape = timed_shape(layer, source.recursion, rows, kv, profile);
  const std::vector<std::int32_t> slots = reserve_rows(rows, kv);
  std::vector<std::int32_t> positions;
  for (const LayerRow& row : rows)
    positions.push_back(row.position);
  const kernels::KvProjectShape project{.rows = n,
                                        .d_model = m.d_model,
                                        .q_dim = m.n_heads * m.head_dim,
                                        .n_kv_heads = m.n_kv_heads,
                                        .head_dim = m.head_dim,
                                        .pool = d.pool_shape};
  float* x = d.x.reserve(static_cast<std::size_t>(n * m.d_model));
  CallInts ints;
  const std::size_t state_part = ints.add(state_slots);
  const std::size_t positions_part = ints.add(positions);
  const std::size_t slots_part = ints.add(slots);
  const std::size_t adapter_part = ints.add(adapters_of(source, rows));
  ints.send(d);
  DeviceOp timed(d, tracer_, profile, shape, ops::kv_only, OpKind::gemm);
  kernels::gather_rows<float>(
      hidden.rows(), x, ints.at(state_part),
      {.count = n, .width = m.d_model, .src_rows = hidden.capacity(), .dst_rows = n}, d.stream);
  with_storage(d.dtype, [&]<typename T>(std::type_identity<T>) {
    T* scratch =
        d.kv_scratch.reserve<T>(static_cast<std::size_t>(kernels::kv_project_scratch(project)));
    T* h = d.h.reserve<T>(static_cast<std::size_t>(n * m.d_model));
    kernels::rms_norm(x, w.attn_norm.get(), h, n, m.d_model, config_.rms_eps, d.stream);
    // K|V per row, the k and v adapters added before rotary (as the CPU's projection does).
    kernels::kv_project_gemm<T>(d.cublas, h, w.qkv.get<T>(), scratch, project, d.stream);
    if (w.has_lora) {
      const std::int32_t* adapter = ints.at(adapter_part);
      const int recursions = m.depth.recursions;
      add_lora(d, w, 1, recursions, adapter, h, m.d_model, scratch, kv_width, n, 0, 2 * kv_width);
      add_lora(d, w, 2, recursions, adapter, h, m.d_model, scratch + kv_width, kv_width, n, 0,
               2 * kv_width);
    }
    kernels::kv_project_store<T>(ints.at(positions_part), d.inv_freq.get(), ints.at(slots_part),
                                 scratch, d.pool.get<T>(), d.pool_positions.get(), project,
                                 d.stream);
  });
}

}  // namespace exitsim::engine
