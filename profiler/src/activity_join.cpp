#include "exitsim/profiler/activity_join.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <tuple>
#include <utility>

#include "exitsim/profiler/kernel_kind.hpp"

namespace exitsim::profiler {
namespace {

bool on_device(ActivityKind kind) {
  return kind == ActivityKind::kernel || kind == ActivityKind::memcpy ||
         kind == ActivityKind::memset;
}

// Rows of equal start keep this order: the launch before its work, the work before the op
// that summarises it.
enum class RowClass : int { host = 0, device = 1, engine_op = 2 };

struct OrderedRow {
  traces::OpTraceRow row;
  RowClass order = RowClass::host;
};

void apply(const SpanShape& shape, traces::OpTraceRow& row) {
  row.batch_tokens = shape.batch_tokens;
  row.context_tokens = shape.context_tokens;
  row.depth = shape.depth;
  row.recursion = shape.recursion;
  row.step_id = shape.step_id;
}

traces::OpKind device_kind(const ActivityRecord& r) {
  switch (r.kind) {
    case ActivityKind::kernel:
      return classify_kernel(r.name);
    case ActivityKind::memcpy:
      return traces::OpKind::memcpy;
    default:
      return traces::OpKind::other;
  }
}

struct OpExtent {
  TimeNs start = std::numeric_limits<TimeNs>::max();
  TimeNs end = std::numeric_limits<TimeNs>::min();
  std::uint32_t device = 0;
  std::uint32_t stream = 0;
};

}  // namespace

void ActivityJoin::add(const ActivityRecord& record) {
  if (record.kind == ActivityKind::external_correlation) {
    external_of_[record.correlation] = record.external_id;
    return;
  }
  records_.push_back(record);
}

void ActivityJoin::label(std::uint64_t external_id, EngineOpLabel label) {
  labels_[external_id] = std::move(label);
}

std::vector<traces::OpTraceRow> ActivityJoin::rows(ActivityJoinStats* stats) const {
  ActivityJoinStats local;
  ActivityJoinStats& s = stats != nullptr ? *stats : local;
  s = {};

  const auto label_of =
      [&](std::uint32_t correlation) -> std::pair<std::uint64_t, const EngineOpLabel*> {
    const auto external = external_of_.find(correlation);
    if (correlation == 0 || external == external_of_.end())
      return {0, nullptr};
    const auto found = labels_.find(external->second);
    return {external->second, found == labels_.end() ? nullptr : &found->second};
  };

  // Host threads numbered by their first call, in time: independent of delivery order.
  std::vector<const ActivityRecord*> runtime;
  for (const ActivityRecord& r : records_) {
    if (r.kind == ActivityKind::runtime)
      runtime.push_back(&r);
  }
  std::stable_sort(runtime.begin(), runtime.end(),
                   [](const auto* a, const auto* b) { return a->start_ns < b->start_ns; });
  std::unordered_map<std::uint32_t, int> thread_index;
  std::unordered_map<std::uint32_t, int> thread_of_call;  // correlation -> host stream
  for (const ActivityRecord* r : runtime) {
    const auto [it, inserted] =
        thread_index.try_emplace(r->thread, static_cast<int>(thread_index.size()));
    thread_of_call[r->correlation] = it->second;
  }

  std::vector<OrderedRow> out;
  out.reserve(records_.size());
  std::map<std::uint64_t, OpExtent> ops;  // external id -> its device work
  for (const ActivityRecord& r : records_) {
    traces::OpTraceRow row;
    row.name = r.name;
    row.start_ns = r.start_ns;
    row.duration_ns = std::max<TimeNs>(0, r.end_ns - r.start_ns);
    row.correlation_id = r.correlation;
    const auto [external, label] = label_of(r.correlation);
    if (label != nullptr)
      apply(label->shape, row);
    RowClass order = RowClass::host;
    if (on_device(r.kind)) {
      ++s.device_records;
      row.kind = device_kind(r);
      row.device = fmt::format("cuda:{}", r.device);
      row.stream = static_cast<int>(std::min<std::uint32_t>(r.stream, 1u << 30));
      order = RowClass::device;
      if (label != nullptr) {
        ++s.attributed;
        OpExtent& op = ops[external];
        if (r.start_ns < op.start) {
          op.start = r.start_ns;
          op.device = r.device;
          op.stream = r.stream;
        }
        op.end = std::max(op.end, r.end_ns);
      } else {
        ++s.unattributed[r.name];
      }
    } else {
      row.kind = traces::OpKind::other;
      row.device = "cpu";
      if (r.kind == ActivityKind::runtime) {
        ++s.runtime_records;
        row.stream = thread_index.at(r.thread);
      } else {
        ++s.waits;
        const auto thread = thread_of_call.find(r.correlation);
        row.stream = thread == thread_of_call.end() ? 0 : thread->second;
        // The wait is not the launch: no arrow to device work from it.
        row.correlation_id = 0;
      }
    }
    out.push_back({std::move(row), order});
  }
  for (const auto& [external, extent] : ops) {
    const EngineOpLabel& label = labels_.at(external);
    traces::OpTraceRow row;
    row.name = label.name;
    row.kind = label.kind;
    row.device = fmt::format("cuda:{}", extent.device);
    row.stream = static_cast<int>(std::min<std::uint32_t>(extent.stream, 1u << 30));
    row.start_ns = extent.start;
    row.duration_ns = std::max<TimeNs>(0, extent.end - extent.start);
    apply(label.shape, row);
    out.push_back({std::move(row), RowClass::engine_op});
  }
  s.engine_ops = static_cast<std::int64_t>(ops.size());

  std::stable_sort(out.begin(), out.end(), [](const OrderedRow& a, const OrderedRow& b) {
    if (a.row.start_ns != b.row.start_ns)
      return a.row.start_ns < b.row.start_ns;
    if (a.order != b.order)
      return static_cast<int>(a.order) < static_cast<int>(b.order);
    // Whatever order CUPTI delivered them in, the same records give the same rows.
    return std::tie(a.row.device, a.row.stream, a.row.correlation_id, a.row.name) <
           std::tie(b.row.device, b.row.stream, b.row.correlation_id, b.row.name);
  });
  std::vector<traces::OpTraceRow> rows;
  rows.reserve(out.size());
  for (OrderedRow& r : out)
    rows.push_back(std::move(r.row));
  return rows;
}

std::string describe(const ActivityJoinStats& stats) {
  std::string text =
      fmt::format("{} of {} device records attributed to {} engine ops; {} waits", stats.attributed,
                  stats.device_records, stats.engine_ops, stats.waits);
  if (!stats.unattributed.empty()) {
    text += "; unattributed:";
    for (const auto& [name, count] : stats.unattributed)
      text += fmt::format(" {} x{}", name, count);
  }
  return text;
}

}  // namespace exitsim::profiler
