// Schema rows: parameter sweeps and output files.
#include "schema_build.hpp"

namespace exitsim::scenario::detail {
namespace {

Binding sweep_binding() {
  return Binding{
      [](Scenario& s, const Resolved& r) {
        s.sweep.clear();
        for (const auto& row : r.records) {
          SweepAxis axis;
          for (const Resolved& cell : row) {
            if (cell.key == "sweep.key")
              assign(axis.key, cell.value);
            if (cell.key == "sweep.values")
              assign(axis.values, cell.value);
          }
          s.sweep.push_back(std::move(axis));
        }
      },
      [](const Scenario& s) {
        Resolved r = loaded({});
        for (const SweepAxis& axis : s.sweep) {
          Resolved key = loaded(axis.key);
          key.key = "sweep.key";
          Resolved values = loaded(axis.values);
          values.key = "sweep.values";
          r.records.push_back({key, values});
        }
        return r;
      },
  };
}

Binding output_field(auto member) {
  return field(&Scenario::outputs, member);
}

}  // namespace

std::vector<KeyDef> output_keys() {
  return {
      Key("sweep", Type::records,
          "Parameter sweep: the scenario runs once per combination of the axes' values.")
          .def(std::vector<std::string>{})
          .bind(sweep_binding()),
      Key("sweep.key", Type::string, "A single-value key path, such as scheduler.max_running.")
          .required(),
      Key("sweep.values", Type::scalar_list, "Values for that key, each valid for it.").required(),
      Key("outputs", Type::section, "What a run writes."),
      Key("outputs.dir", Type::string, "Output directory (created if missing).")
          .def(std::string("out"))
          .bind(output_field(&OutputConfig::dir)),
      Key("outputs.summary_json", Type::boolean, "Write summary.json (metrics of the run).")
          .def(true)
          .bind(output_field(&OutputConfig::summary_json)),
      Key("outputs.requests_csv", Type::boolean, "Write requests.csv (one row per request).")
          .def(true)
          .bind(output_field(&OutputConfig::requests_csv)),
      Key("outputs.timeline", Type::boolean, "Write a Perfetto-viewable timeline.")
          .def(false)
          .bind(output_field(&OutputConfig::timeline)),
      Key("outputs.timeline_max_mb", Type::number,
          "Stop recording the timeline past this size, in MB.")
          .range(0, std::nullopt)
          .open_min()
          .def(256.0)
          .bind(output_field(&OutputConfig::timeline_max_mb)),
      Key("engine", Type::section,
          "How the real engine is measured on the CPU backend (`exitsim engine run`, "
          "`validate`; the simulator ignores it). Command-line --threads, --pin and --warmup "
          "win."),
      Key("engine.threads", Type::integer,
          "OpenMP threads of the CPU backend; 0: OpenMP's choice (OMP_NUM_THREADS, else every "
          "core). Part of the profile's hardware name.")
          .range(0, 4096)
          .def(std::int64_t{0})
          .bind(field(&Scenario::engine, &EngineConfig::threads)),
      Key("engine.pin", Type::boolean,
          "Bind each engine thread to its own core (steadier timing on a shared machine).")
          .def(false)
          .bind(field(&Scenario::engine, &EngineConfig::pin)),
      Key("engine.warmup_requests", Type::integer,
          "Requests decoded untimed before a measured run (caches, page faults, thread start).")
          .range(0, 1e6)
          .def(std::int64_t{4})
          .bind(field(&Scenario::engine, &EngineConfig::warmup_requests)),
  };
}

}  // namespace exitsim::scenario::detail
