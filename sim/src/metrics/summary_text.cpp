#include <fmt/format.h>

#include <iterator>
#include <string>
#include <vector>

#include "exitsim/sim/metrics/metrics.hpp"

namespace exitsim::sim {
namespace {

void append_latency_row(std::string& out, const char* name, const LatencyStats& stats) {
  auto it = std::back_inserter(out);
  fmt::format_to(it, "  {:<10} {:>9}", name, stats.count);
  if (stats.count == 0) {
    for (int i = 0; i < 5; ++i)
      fmt::format_to(it, " {:>10}", "-");
  } else {
    for (double value : {stats.mean, stats.p50, stats.p90, stats.p99, stats.max})
      fmt::format_to(it, " {:>10.3f}", value);
  }
  out += '\n';
}

std::string slo_line(const MetricsSummary& s) {
  struct Target {
    const char* name;
    const std::optional<double>& target;
  };
  const Target targets[] = {
      {"ttft", s.slo.ttft_ms}, {"tpot", s.slo.tpot_ms}, {"e2e", s.slo.e2e_ms}};
  std::vector<std::string> parts;
  for (const Target& t : targets) {
    if (!t.target)
      continue;
    const auto it = s.slo_attainment_by_metric.find(t.name);
    const double attained = it == s.slo_attainment_by_metric.end() ? 0.0 : it->second;
    parts.push_back(fmt::format("{} <= {:g} ms: {:.2f}%", t.name, *t.target, 100 * attained));
  }
  if (parts.empty())
    return "no targets (every request counts as meeting them)";
  return fmt::format("{:.2f}% meet every target ({})", 100 * s.slo_attainment,
                     fmt::join(parts, ", "));
}

}  // namespace

std::string format_summary(const MetricsSummary& s) {
  std::string out;
  auto it = std::back_inserter(out);
  fmt::format_to(it, "{:<16}{} ({} input tokens, {} output tokens)\n", "requests", s.requests,
                 s.input_tokens, s.output_tokens);
  fmt::format_to(it, "{:<16}{:.3f} s (first arrival to last completion)\n", "makespan",
                 to_seconds(s.makespan));
  fmt::format_to(it, "{:<16}{:.2f} output tokens/s, {:.3f} requests/s\n", "throughput",
                 s.throughput_tokens_per_s, s.request_throughput_per_s);
  fmt::format_to(it, "{:<16}{:.3f} requests/s meeting every SLO\n", "goodput",
                 s.goodput_requests_per_s);
  fmt::format_to(it, "{:<16}{}\n", "SLO attainment", slo_line(s));
  fmt::format_to(it, "{:<12} {:>9} {:>10} {:>10} {:>10} {:>10} {:>10}\n", "latency (ms)", "count",
                 "mean", "p50", "p90", "p99", "max");
  append_latency_row(out, "TTFT", s.ttft);
  append_latency_row(out, "TPOT", s.tpot);
  append_latency_row(out, "ITL", s.itl);
  append_latency_row(out, "E2E", s.e2e);
  append_latency_row(out, "queueing", s.queueing);
  fmt::format_to(it, "{:<16}{} iterations, mean batch size {:.2f} sequences\n", "batches",
                 s.iterations, s.mean_batch_size);
  fmt::format_to(it, "{:<16}{}", "preemptions", s.preemptions);
  if (s.recomputed_tokens > 0)
    fmt::format_to(it, " ({} tokens recomputed: wasted work)", s.recomputed_tokens);
  out += '\n';
  if (const auto& t = s.transfers) {
    fmt::format_to(
        it,
        "{:<16}{} prompts' K/V to decode replicas, {:.3f} GB per GPU, {:.3f} ms mean "
        "({:.3f} ms longest), up to {} at once on one link\n",
        "kv transfers", t->transfers, static_cast<double>(t->bytes) / 1e9,
        t->transfers > 0 ? to_milliseconds(t->total_time) / static_cast<double>(t->transfers) : 0.0,
        to_milliseconds(t->longest), t->most_concurrent);
  }
  if (const auto& w = s.swap) {
    fmt::format_to(it,
                   "{:<16}{} victims to host memory, {:.3f} GB out and {:.3f} GB back, {:.3f} s "
                   "of transfers in iterations, {} recomputed instead (swap space full)\n",
                   "swap", w->swapped_out, static_cast<double>(w->swapped_out_bytes) / 1e9,
                   static_cast<double>(w->swapped_in_bytes) / 1e9, to_seconds(w->transfer_time),
                   w->recomputed_instead);
  }
  if (const auto& a = s.adaptive_threshold) {
    fmt::format_to(it,
                   "{:<16}{} calibration pairs, {} refits ({} degenerate): threshold {:.4g} at "
                   "first, {:.4g} at last, {:.4g} to {:.4g} (threshold_trajectory.csv)\n",
                   "adaptive thresh", a->pairs, a->refits(), a->degenerate_refits(),
                   a->initial_threshold, a->last_threshold(), a->min_threshold(),
                   a->max_threshold());
  }
  if (const auto& p = s.prefix_cache) {
    fmt::format_to(it,
                   "{:<16}{:.1f}% of admitted prompt tokens read from cache ({} of {}; {:.1f}% of "
                   "the {} named blocks), {:.3g} prefill FLOPs saved, {} blocks evicted\n",
                   "prefix cache", 100 * p->token_hit_rate(), p->hit_tokens,
                   p->admitted_prompt_tokens, 100 * p->block_hit_rate(), p->hashed_blocks,
                   p->prefill_flops_saved, p->evicted_blocks);
  }
  if (s.rejected.total() > 0) {
    fmt::format_to(it,
                   "{:<16}{} requests rejected at arrival ({} prompts over the batch budget, {} "
                   "over the context window, {} over the K/V memory); in no figure above\n",
                   "rejected", s.rejected.total(), s.rejected.prompt_over_batch_budget,
                   s.rejected.over_context_window, s.rejected.over_kv_capacity);
  }
  if (s.depth.exit_depth_tokens.size() > 1 || s.depth.masked_flops > 0 ||
      s.depth.fill_token_passes > 0) {
    fmt::format_to(
        it,
        "{:<16}mean exit depth {:.2f} layers, executed {:.2f} per token; masked work "
        "{:.1f}% of FLOPs; {} fill token passes over {} token-layers\n",
        "depth", s.depth.mean_exit_depth, s.depth.mean_executed_depth,
        s.depth.executed_flops > 0 ? 100 * s.depth.masked_flops / s.depth.executed_flops : 0.0,
        s.depth.fill_token_passes, s.depth.fill_layers);
    if (s.depth.rolled_back_tokens > 0) {
      fmt::format_to(it, "{:<16}{} output tokens rolled back and regenerated\n", "rollback",
                     s.depth.rolled_back_tokens);
    }
  }
  fmt::format_to(it, "{:<16}within {:g}% relative error of a true sample (mean, max exact)\n",
                 "percentiles", 100 * s.percentile_relative_error);
  for (const std::string& warning : s.warnings)
    fmt::format_to(it, "{:<16}{}\n", "WARNING", warning);
  return out;
}

}  // namespace exitsim::sim
