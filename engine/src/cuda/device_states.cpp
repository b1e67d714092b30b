// The GPU backend's hidden-state store: slots are rows of one device array; moving rows between
// slots, or between the host and slots, goes through the compaction kernels.
#include <cuda_runtime_api.h>

#include <algorithm>

#include "cuda/device.hpp"
#include "exitsim/kernels/compaction.hpp"
#include "exitsim/traces/engine_ops.hpp"

namespace exitsim::engine {
namespace {

kernels::CompactionShape shape_of(std::size_t count, std::int64_t width, std::int64_t src_rows,
                                  std::int64_t dst_rows) {
  return {.count = static_cast<std::int64_t>(count),
          .width = width,
          .src_rows = src_rows,
          .dst_rows = dst_rows};
}

}  // namespace

Matrix DeviceStates::read(std::span<const StateSlot> slots) const {
  check_held(slots);
  Matrix out(static_cast<Eigen::Index>(slots.size()), width());
  if (slots.empty())
    return out;
  const auto n = static_cast<std::int64_t>(slots.size());
  float* staged = staged_.reserve(static_cast<std::size_t>(n * width()));
  kernels::gather_rows<float>(rows_.get(), staged, device_.upload(from_, slots),
                              shape_of(slots.size(), width(), capacity(), n), device_.stream);
  kernels::check_cuda(
      cudaMemcpyAsync(out.data(), staged, sizeof(float) * static_cast<std::size_t>(out.size()),
                      cudaMemcpyDeviceToHost, device_.stream),
      "cudaMemcpyAsync (hidden states to host)");
  device_.sync("cudaStreamSynchronize (hidden states to host)");
  return out;
}

void DeviceStates::write(std::span<const StateSlot> slots, const Matrix& rows) {
  check_held(slots, rows.rows());
  if (rows.cols() != width())
    throw std::logic_error("hidden-state rows of another width than the store's");
  if (slots.empty())
    return;
  const auto n = static_cast<std::int64_t>(slots.size());
  const float* staged = device_.upload(
      staged_, std::span<const float>(rows.data(), static_cast<std::size_t>(rows.size())));
  kernels::scatter_rows<float>(staged, rows_.get(), device_.upload(to_, slots),
                               shape_of(slots.size(), width(), n, capacity()), device_.stream);
}

void DeviceStates::copy(std::span<const StateSlot> from, std::span<const StateSlot> to) {
  check_held(from);
  check_held(to, static_cast<std::int64_t>(from.size()));
  if (from.empty())
    return;
  const auto n = static_cast<std::int64_t>(from.size());
  const profiler::SpanShape shape{.batch_tokens = n};
  const DeviceOp label(device_, tracer_, {}, shape, traces::engine_ops::compaction,
                       traces::OpKind::memcpy);
  float* staged = staged_.reserve(static_cast<std::size_t>(n * width()));
  kernels::gather_rows<float>(rows_.get(), staged, device_.upload(from_, from),
                              shape_of(from.size(), width(), capacity(), n), device_.stream);
  kernels::scatter_rows<float>(staged, rows_.get(), device_.upload(to_, to),
                               shape_of(to.size(), width(), n, capacity()), device_.stream);
}

void DeviceStates::grow(std::int64_t new_capacity) {
  DeviceArray<float> grown;
  grown.reserve(static_cast<std::size_t>(new_capacity * width()));
  if (capacity() > 0) {
    kernels::check_cuda(
        cudaMemcpyAsync(grown.get(), rows_.get(),
                        sizeof(float) * static_cast<std::size_t>(capacity() * width()),
                        cudaMemcpyDeviceToDevice, device_.stream),
        "cudaMemcpyAsync (growing hidden states)");
  }
  // The old rows are freed by cudaFree, which waits for the device: the copy has been made.
  rows_ = std::move(grown);
}

}  // namespace exitsim::engine
