#include "exitsim/profiler/host_profiler.hpp"

#include <limits>
#include <stdexcept>
#include <utility>

namespace exitsim::profiler {

HostProfiler::HostProfiler(HostProfilerOptions options)
    : options_(std::move(options)),
      origin_(std::chrono::steady_clock::now()),
      next_correlation_id_(options_.first_correlation_id) {
  if (options_.enabled)
    records_.reserve(options_.capacity);
}

HostProfiler::Span HostProfiler::span(std::string_view name, traces::OpKind kind, SpanShape shape) {
  if (!options_.enabled)
    return Span{};
  Record& record = records_.emplace_back();
  record.name = intern(name);
  record.kind = kind;
  record.shape = shape;
  record.correlation_id = next_correlation_id_++;
  // Read the clock last, so that the bookkeeping above is not charged to the span.
  record.start = now();
  return Span(this, records_.size() - 1);
}

std::uint32_t HostProfiler::intern(std::string_view name) {
  if (auto it = name_ids_.find(name); it != name_ids_.end())
    return it->second;
  if (names_.size() >= std::numeric_limits<std::uint32_t>::max()) {
    throw std::length_error("HostProfiler: too many distinct span names");
  }
  const auto id = static_cast<std::uint32_t>(names_.size());
  const std::string& stored = names_.emplace_back(name);
  name_ids_.emplace(std::string_view(stored), id);
  return id;
}

traces::OpTraceRow HostProfiler::row_of(const Record& record) const {
  return traces::OpTraceRow{
      .name = names_[record.name],
      .kind = record.kind,
      .device = options_.device,
      .stream = options_.stream,
      .start_ns = record.start,
      .duration_ns = record.end < record.start ? 0 : record.end - record.start,
      .batch_tokens = record.shape.batch_tokens,
      .context_tokens = record.shape.context_tokens,
      .depth = record.shape.depth,
      .recursion = record.shape.recursion,
      .step_id = record.shape.step_id,
      .correlation_id = record.correlation_id,
  };
}

std::vector<traces::OpTraceRow> HostProfiler::rows() const {
  std::vector<traces::OpTraceRow> out;
  out.reserve(records_.size());
  for (const Record& record : records_)
    out.push_back(row_of(record));
  return out;
}

void HostProfiler::write(traces::OpTraceWriter& out) const {
  for (const Record& record : records_)
    out.write(row_of(record));
}

}  // namespace exitsim::profiler
