// Schema rows: the workload (where requests come from, when they arrive, how long they are).
#include "schema_build.hpp"

namespace exitsim::scenario::detail {
namespace {

struct LengthDefaults {
  std::int64_t min;
  std::int64_t max;
  double mean;
  double sigma;
  std::string column;
};

Binding length_field(LengthConfig WorkloadConfig::*which, auto member) {
  return field(&Scenario::workload, which, member);
}

std::vector<KeyDef> length_keys(const std::string& section, LengthConfig WorkloadConfig::*which,
                                const std::string& noun, const LengthDefaults& d) {
  const std::string dist = section + ".dist";
  return {
      Key(section, Type::section, "Distribution of " + noun + " lengths (synthetic workloads).")
          .when("workload.source", {"synthetic"}),
      Key(dist, Type::enumeration,
          "fixed: always `value`; uniform: integers in [min, max]; lognormal: given mean and "
          "sigma, clamped to [min, max]; empirical: resampled from a trace's lengths.")
          .allowed({"fixed", "uniform", "lognormal", "empirical"})
          .def(std::string("lognormal"))
          .bind(length_field(which, &LengthConfig::dist)),
      Key(section + ".value", Type::integer, "Length of every request, in tokens.")
          .range(1, std::nullopt)
          .def(d.mean > 0 ? static_cast<std::int64_t>(d.mean) : 1)
          .when(dist, {"fixed"})
          .bind(length_field(which, &LengthConfig::value)),
      Key(section + ".min", Type::integer,
          "Lower bound (uniform) or clamp (lognormal; empirical only when given), in tokens; "
          "clamped draws are counted in the summary's warnings.")
          .range(1, std::nullopt)
          .def(d.min)
          .when(dist, {"uniform", "lognormal", "empirical"})
          .bind(length_field(which, &LengthConfig::min)),
      Key(section + ".max", Type::integer,
          "Upper bound (uniform, required > 0) or clamp (lognormal; empirical only when given; "
          "0 = none), in tokens.")
          .range(0, std::nullopt)
          .def(d.max)
          .when(dist, {"uniform", "lognormal", "empirical"})
          .bind(length_field(which, &LengthConfig::max)),
      Key(section + ".mean", Type::number, "Mean length in tokens.")
          .range(0, std::nullopt)
          .open_min()
          .def(d.mean)
          .when(dist, {"lognormal"})
          .bind(length_field(which, &LengthConfig::mean)),
      Key(section + ".sigma", Type::number, "Standard deviation of log(length).")
          .range(0, 10)
          .def(d.sigma)
          .when(dist, {"lognormal"})
          .bind(length_field(which, &LengthConfig::sigma)),
      Key(section + ".path", Type::string,
          "Trace whose lengths are resampled (any supported request-trace format).")
          .input_path()
          .required()
          .when(dist, {"empirical"})
          .bind(length_field(which, &LengthConfig::path)),
      Key(section + ".column", Type::enumeration, "Which lengths of that trace to use.")
          .allowed({"input", "output"})
          .def(d.column)
          .when(dist, {"empirical"})
          .bind(length_field(which, &LengthConfig::column)),
  };
}

Binding trace_field(auto member) {
  return field(&Scenario::workload, &WorkloadConfig::trace, member);
}
Binding columns_field(auto member) {
  return field(&Scenario::workload, &WorkloadConfig::trace, &TraceConfig::columns, member);
}
Binding arrival_field(auto member) {
  return field(&Scenario::workload, &WorkloadConfig::arrivals, member);
}
Binding prefix_field(auto member) {
  return field(&Scenario::workload, &WorkloadConfig::prefix, member);
}

std::vector<KeyDef> prefix_keys() {
  const std::string kind = "workload.prefix.kind";
  return {
      Key("workload.prefix", Type::section,
          "Shared prompt prefixes for requests that name none (prefix caching; a trace's own "
          "hashes, like Mooncake's, take precedence)."),
      Key(kind, Type::enumeration,
          "none; system_prompts: a share of requests start with one of a few system prompts; "
          "sessions: multi-turn conversations, each turn's prompt the previous turn's prompt "
          "and output plus a new message (synthetic workloads only).")
          .allowed({"none", "system_prompts", "sessions"})
          .def(std::string("none"))
          .bind(prefix_field(&PrefixModelConfig::kind)),
      Key("workload.prefix.block_tokens", Type::integer,
          "Tokens per named block of the generated prefixes.")
          .range(1, 1 << 20)
          .def(std::int64_t{16})
          .when(kind, {"system_prompts", "sessions"})
          .bind(prefix_field(&PrefixModelConfig::block_tokens)),
      Key("workload.prefix.prompts", Type::integer, "Distinct system prompts.")
          .range(1, 1e9)
          .def(std::int64_t{1})
          .when(kind, {"system_prompts"})
          .bind(prefix_field(&PrefixModelConfig::prompts)),
      Key("workload.prefix.tokens", Type::integer,
          "Tokens of each system prompt (a prompt shorter than that is all system prompt).")
          .range(1, 1e9)
          .required()
          .when(kind, {"system_prompts"})
          .bind(prefix_field(&PrefixModelConfig::tokens)),
      Key("workload.prefix.share", Type::number,
          "Fraction of requests that start with a system prompt (drawn per request, seeded).")
          .range(0, 1)
          .def(1.0)
          .when(kind, {"system_prompts"})
          .bind(prefix_field(&PrefixModelConfig::share)),
      Key("workload.prefix.turns", Type::integer, "Turns per conversation.")
          .range(1, 1e6)
          .def(std::int64_t{4})
          .when(kind, {"sessions"})
          .bind(prefix_field(&PrefixModelConfig::turns)),
      Key("workload.prefix.concurrent", Type::integer,
          "Conversations at a time: requests go to them in turn, so a conversation's next turn "
          "comes this many requests after its previous one.")
          .range(1, 1e6)
          .def(std::int64_t{16})
          .when(kind, {"sessions"})
          .bind(prefix_field(&PrefixModelConfig::concurrent)),
  };
}

}  // namespace

std::vector<KeyDef> workload_keys() {
  std::vector<KeyDef> rows = {
      Key("workload", Type::section, "The requests: synthetic or replayed from a trace."),
      Key("workload.source", Type::enumeration,
          "synthetic: arrivals and lengths drawn from the distributions below; trace: replay a "
          "request trace.")
          .allowed({"synthetic", "trace"})
          .def(std::string("synthetic"))
          .bind(field(&Scenario::workload, &WorkloadConfig::source)),
      Key("workload.requests", Type::integer,
          "Number of synthetic requests (a trace replays whole: see workload.trace.max_requests).")
          .range(1, 1e9)
          .def(std::int64_t{2000})
          .when("workload.source", {"synthetic"})
          .bind(field(&Scenario::workload, &WorkloadConfig::requests)),
      Key("workload.trace", Type::section, "The request trace to replay.")
          .when("workload.source", {"trace"}),
      Key("workload.trace.path", Type::string, "Trace file.")
          .input_path()
          .required()
          .bind(trace_field(&TraceConfig::path)),
      Key("workload.trace.format", Type::enumeration,
          "File format; auto detects it from the header (all but csv, which needs "
          "workload.trace.columns). See docs/traces.md.")
          .allowed({"auto", "azure", "vidur", "mooncake", "burstgpt", "native", "tracev2", "csv",
                    "sharegpt"})
          .def(std::string("auto"))
          .bind(trace_field(&TraceConfig::format)),
      Key("workload.trace.columns", Type::section,
          "Which header columns of a generic CSV hold what; other columns are ignored.")
          .when("workload.trace.format", {"csv"}),
      Key("workload.trace.columns.arrival", Type::string,
          "Column of arrival times; empty: the rows have none and workload.arrivals draws them.")
          .def(std::string(""))
          .bind(columns_field(&TraceColumnsConfig::arrival)),
      Key("workload.trace.columns.arrival_unit", Type::enumeration,
          "Unit of the arrival column: s, ms, us or ns for non-negative decimal numbers (an "
          "exponent allowed, exact to the nanosecond); datetime for YYYY-MM-DD HH:MM:SS[.f] with "
          "an optional UTC offset. Arrivals count from the first row's.")
          .allowed({"s", "ms", "us", "ns", "datetime"})
          .def(std::string("s"))
          .bind(columns_field(&TraceColumnsConfig::arrival_unit)),
      Key("workload.trace.columns.input_tokens", Type::string,
          "Column of prompt lengths (integer tokens).")
          .required()
          .bind(columns_field(&TraceColumnsConfig::input_tokens)),
      Key("workload.trace.columns.output_tokens", Type::string,
          "Column of output lengths (integer tokens).")
          .required()
          .bind(columns_field(&TraceColumnsConfig::output_tokens)),
      Key("workload.trace.max_requests", Type::integer,
          "Replay only the trace's first N requests (0 = the whole trace); the summary then says "
          "how many of the trace's requests ran.")
          .range(0, 1e9)
          .def(std::int64_t{0})
          .bind(trace_field(&TraceConfig::max_requests)),
      Key("workload.trace.rate_scale", Type::number,
          "Replay speed-up: inter-arrival gaps are divided by this factor.")
          .range(0, 1e6)
          .open_min()
          .def(1.0)
          .bind(trace_field(&TraceConfig::rate_scale)),
      Key("workload.trace.skip_bad_rows", Type::boolean,
          "Skip malformed rows (counted and reported) instead of failing.")
          .def(false)
          .bind(trace_field(&TraceConfig::skip_bad_rows)),
      Key("workload.trace.tokenizer", Type::string,
          "A Hugging Face tokenizer.json (byte-level BPE) that counts the tokens of a ShareGPT "
          "trace's turns; other formats hold token counts and ignore it.")
          .input_path()
          .def(std::string(""))
          .bind(trace_field(&TraceConfig::tokenizer)),
      Key("workload.arrivals", Type::section,
          "Arrival process for synthetic workloads and for traces without timestamps."),
      Key("workload.arrivals.process", Type::enumeration,
          "poisson: exponential gaps; gamma: gamma gaps with coefficient of variation cv; "
          "constant: evenly spaced; on_off: Poisson during on periods, silent during off.")
          .allowed({"poisson", "gamma", "constant", "on_off"})
          .def(std::string("poisson"))
          .bind(arrival_field(&ArrivalConfig::process)),
      Key("workload.arrivals.rate", Type::number,
          "Mean arrival rate in requests/s (during on periods for on_off).")
          .range(0, 1e9)
          .open_min()
          .def(4.0)
          .bind(arrival_field(&ArrivalConfig::rate)),
      Key("workload.arrivals.cv", Type::number,
          "Coefficient of variation of the gaps (at least 0.01: the gamma's shape 1/cv^2 must "
          "stay finite; for evenly spaced arrivals use process: constant).")
          .range(0.01, 100)
          .def(1.0)
          .when("workload.arrivals.process", {"gamma"})
          .bind(arrival_field(&ArrivalConfig::cv)),
      Key("workload.arrivals.on_seconds", Type::number, "Length of each on period, in seconds.")
          .range(0, std::nullopt)
          .open_min()
          .def(10.0)
          .when("workload.arrivals.process", {"on_off"})
          .bind(arrival_field(&ArrivalConfig::on_seconds)),
      Key("workload.arrivals.off_seconds", Type::number, "Length of each off period, in seconds.")
          .range(0, std::nullopt)
          .def(10.0)
          .when("workload.arrivals.process", {"on_off"})
          .bind(arrival_field(&ArrivalConfig::off_seconds)),
  };
  for (auto part : {length_keys("workload.input_tokens", &WorkloadConfig::input_tokens, "prompt",
                                {16, 6144, 1024.0, 1.0, "input"}),
                    length_keys("workload.output_tokens", &WorkloadConfig::output_tokens, "output",
                                {1, 2048, 256.0, 0.8, "output"}),
                    prefix_keys()}) {
    rows.insert(rows.end(), part.begin(), part.end());
  }
  return rows;
}

}  // namespace exitsim::scenario::detail
