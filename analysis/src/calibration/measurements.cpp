// Reading calibration measurements: op traces (with run.json and steps.csv beside), op grids
// (with <name>.run.json beside).
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "exitsim/analysis/calibrate.hpp"
#include "exitsim/core/error.hpp"
#include "exitsim/traces/engine_ops.hpp"
#include "exitsim/traces/json_document.hpp"
#include "exitsim/traces/op_grid.hpp"
#include "exitsim/traces/op_trace.hpp"
#include "parts.hpp"

namespace exitsim::analysis {

namespace ops = traces::engine_ops;

std::string grid_description_path(const std::string& grid_path) {
  std::filesystem::path p(grid_path);
  p.replace_extension(".run.json");
  return p.string();
}

std::string run_description_path(const std::string& measurement_path) {
  if (traces::is_op_grid(measurement_path))
    return grid_description_path(measurement_path);
  return (std::filesystem::path(measurement_path).parent_path() / "run.json").string();
}

sim::ProfileSource read_run_description(const std::string& op_trace_path) {
  const std::string path = run_description_path(op_trace_path);
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw InputError({path, 0, 0, ""},
                     expected_found("the run description that `exitsim engine run --profile-dir` "
                                    "writes beside " +
                                        op_trace_path,
                                    "no readable file"));
  }
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const nlohmann::json root = traces::parse_json_document(text, path, "JSON");
  sim::ProfileSource source;
  const auto field = [&](const char* key) {
    if (!root.is_object() || !root.contains(key) || !root[key].is_string())
      throw InputError({path, 0, 0, key}, expected_found("a string", "none"));
    return root[key].get<std::string>();
  };
  source.engine = field("engine");
  source.backend = field("backend");
  source.hardware = field("hardware");
  source.model = field("model");
  source.model_shape = field("model_shape");
  source.traces = {op_trace_path};
  if (root.contains("build"))
    source.build = field("build");
  // The speed probe at the start and end of the run (engine/op_timing.hpp); older runs have none.
  if (root.contains("speed_probe")) {
    const nlohmann::json& probe = root["speed_probe"];
    const auto reading = [&](const char* key) {
      const nlohmann::json* at = probe.is_object() && probe.contains(key) && probe[key].is_object()
                                     ? &probe[key]
                                     : nullptr;
      if (at == nullptr || !at->contains("median_us") || !(*at)["median_us"].is_number() ||
          (*at)["median_us"].get<double>() <= 0) {
        throw InputError({path, 0, 0, std::string("speed_probe.") + key + ".median_us"},
                         expected_found("a time in microseconds > 0", "none"));
      }
      return (*at)["median_us"].get<double>();
    };
    source.speed_probe_us = 0.5 * (reading("start") + reading("end"));
  }
  return source;
}

bool priced_op(std::string_view name) {
  if (name.ends_with(ops::prefill_suffix))
    name.remove_suffix(ops::prefill_suffix.size());
  return std::find(ops::layer.begin(), ops::layer.end(), name) != ops::layer.end() ||
         name == ops::kv_only || name == ops::embed || name == ops::lm_head ||
         name == ops::sampling || name == ops::tp_all_reduce || name == ops::graph_step;
}

void same_source(const sim::ProfileSource& a, const sim::ProfileSource& b) {
  const auto check = [&](const char* key, const std::string& x, const std::string& y) {
    if (x != y) {
      throw InputError(
          {b.traces.front(), 0, 0, key},
          expected_found(fmt::format("\"{}\" as in {}", x, a.traces.front()), "\"" + y + "\""));
    }
  };
  check("engine", a.engine, b.engine);
  check("backend", a.backend, b.backend);
  check("hardware", a.hardware, b.hardware);
  check("model_shape", a.model_shape, b.model_shape);
  // A debug and an optimised build time the same ops several times apart.
  if (!a.build.empty() && !b.build.empty())
    check("build", a.build, b.build);
}

namespace {

// The steps of steps.csv beside an op trace that ran a prefill pass (empty without the file).
std::set<std::uint64_t> steps_with_prefill(const std::string& op_trace_path) {
  std::set<std::uint64_t> out;
  std::ifstream in(std::filesystem::path(op_trace_path).parent_path() / "steps.csv");
  std::string line;
  if (!in || !std::getline(in, line))
    return out;
  while (std::getline(in, line)) {
    // step_id,start_ns,prefill_request_ids,decode_request_ids (ids joined by ';').
    const std::size_t first = line.find(',');
    const std::size_t second = line.find(',', first + 1);
    const std::size_t third = line.find(',', second + 1);
    if (first == std::string::npos || second == std::string::npos || third == std::string::npos)
      continue;
    if (third > second + 1)
      out.insert(std::strtoull(line.substr(0, first).c_str(), nullptr, 10));
  }
  return out;
}

// Which pass of its step a layer call belongs to. A step runs its prefill pass first, calling
// every layer op once per executed layer in ascending depth up to the coda; the decode pass
// that follows starts again below that. So in a step with a prefill pass, a layer op's calls are
// prefill until the op is called at a depth not above its previous call.
class PassTracker {
 public:
  explicit PassTracker(std::set<std::uint64_t> prefill_steps)
      : prefill_steps_(std::move(prefill_steps)) {}

  bool in_prefill(const traces::OpTraceRow& row) {
    if (row.step_id != step_) {
      step_ = row.step_id;
      open_ = prefill_steps_.contains(step_);
      last_depth_.clear();
    }
    if (!open_ || row.depth < 0)
      return false;
    const auto [it, fresh] = last_depth_.try_emplace(row.name, row.depth);
    if (!fresh) {
      if (row.depth <= it->second) {
        open_ = false;
        return false;
      }
      it->second = row.depth;
    }
    return true;
  }

 private:
  std::set<std::uint64_t> prefill_steps_;
  std::uint64_t step_ = 0;
  bool open_ = false;
  std::map<std::string, int> last_depth_;
};

bool is_layer_op(std::string_view name) {
  return std::find(ops::layer.begin(), ops::layer.end(), name) != ops::layer.end();
}

}  // namespace

void read_trace(const std::string& path, bool split_passes, Samples& samples,
                std::vector<TraceStep>& steps) {
  std::map<std::uint64_t, std::pair<TimeNs, TraceStep>> by_id;  // first start, the step
  PassTracker passes(split_passes ? steps_with_prefill(path) : std::set<std::uint64_t>{});
  traces::OpTraceReader reader(path);
  while (const auto row = reader.next()) {
    const double us = static_cast<double>(row->duration_ns) / 1000.0;
    const bool prefill = is_layer_op(row->name) && passes.in_prefill(*row);
    const OpSample call{static_cast<double>(row->batch_tokens),
                        static_cast<double>(row->context_tokens), us};
    const auto entry =
        samples.try_emplace(prefill ? row->name + std::string(ops::prefill_suffix) : row->name)
            .first;
    entry->second.first = std::string(traces::to_string(row->kind));
    entry->second.second.push_back(call);
    auto [it, fresh] = by_id.try_emplace(row->step_id, row->start_ns, TraceStep{});
    auto& [first_start, step] = it->second;
    first_start = std::min(first_start, row->start_ns);
    if (priced_op(row->name))
      step.calls.emplace_back(&entry->first, call);
    if (row->name == ops::wait_for_arrival)
      step.idle_us += us;
    if (row->name == ops::embed)
      step.embedded += static_cast<double>(row->batch_tokens);
    if (row->name == ops::sampling)
      step.emitted += static_cast<double>(row->batch_tokens);
  }
  // A step lasts from its first op to the next step's first op, so scheduling between steps
  // is part of the residual, as the simulator sees it, but waiting for arrivals is not. The
  // last step has no such end, and a wait before the first step is no step: both left out.
  for (auto it = by_id.begin(); it != by_id.end() && std::next(it) != by_id.end(); ++it) {
    TraceStep& step = it->second.second;
    if (step.calls.empty())
      continue;
    step.wall_us = static_cast<double>(std::next(it)->second.first - it->second.first) / 1000.0;
    steps.push_back(std::move(step));
  }
}

void read_grid(const std::string& path, Samples& samples) {
  traces::OpGridReader reader(path);
  while (const auto row = reader.next()) {
    auto& entry =
        samples[row->shape == "prefill" ? row->op + std::string(ops::prefill_suffix) : row->op];
    entry.first = std::string(traces::to_string(row->kind));
    entry.second.push_back({static_cast<double>(row->batch_tokens),
                            static_cast<double>(row->context_tokens), row->median_us});
  }
}

}  // namespace exitsim::analysis
