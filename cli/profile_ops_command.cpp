// `exitsim engine profile-ops`: every engine op timed in isolation over a grid of batch tokens x
// attention context, the way Vidur profiles an engine; `exitsim calibrate` fits from the grid.
#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "commands.hpp"
#include "engine_model.hpp"
#include "engine_outputs.hpp"
#include "exitsim/analysis/calibrate.hpp"
#include "exitsim/core/error.hpp"
#include "exitsim/engine/op_timing.hpp"
#include "exitsim/traces/op_grid.hpp"
#include "output_paths.hpp"
#include "progress.hpp"

namespace exitsim::cli {

namespace {

struct ProfileOpsArgs {
  ModelOptions model;
  std::string out;
  std::vector<std::int64_t> batch_tokens = {1, 2, 4, 8, 16, 32, 64, 128, 256};
  std::vector<std::int64_t> contexts = {0, 16, 64, 128, 256};
  std::vector<std::string> shapes = {"decode", "prefill"};
  engine::OpTimingOptions timing;
  int rounds = 3;
};

traces::OpGridRow grid_row(const engine::OpTiming& t) {
  traces::OpGridRow row;
  row.op = t.op;
  row.kind = t.kind;
  row.shape = engine::to_string(t.shape);
  row.layer = t.layer;
  row.recursion = t.recursion;
  row.batch_tokens = t.batch_tokens;
  row.context_tokens = t.context_tokens;
  row.repetitions = static_cast<std::int64_t>(t.times_us.size());
  row.median_us = t.median_us();
  row.p10_us = t.percentile_us(0.1);
  row.p90_us = t.percentile_us(0.9);
  row.min_us = t.percentile_us(0.0);
  row.max_us = t.percentile_us(1.0);
  return row;
}

void run_profile_ops(const ProfileOpsArgs& args) {
  check_output_file_folder(args.out, "--out");
  const auto loaded = load_model(args.model);
  const engine::Backend& backend = *loaded->model;
  if (args.timing.repetitions < 3) {
    throw InputError({"", 0, 0, "--repetitions"},
                     expected_found("at least 3 (a median and a spread)",
                                    std::to_string(args.timing.repetitions)));
  }
  if (args.timing.layer >= backend.executed_layers()) {
    throw InputError({"", 0, 0, "--layer"}, expected_found(fmt::format("an executed layer below {}",
                                                                       backend.executed_layers()),
                                                           std::to_string(args.timing.layer)));
  }
  std::vector<engine::OpGridPoint> points;
  for (const std::string& shape : args.shapes) {
    const engine::CallShape call =
        shape == "decode" ? engine::CallShape::decode : engine::CallShape::prefill;
    for (const std::int64_t b : args.batch_tokens) {
      // A one-token prefill chunk is a decode row.
      if (call == engine::CallShape::prefill && b == 1)
        continue;
      for (const std::int64_t c : args.contexts) {
        // A decode token always follows its prompt: no decode row runs at position 0 (where
        // rotary embedding takes a fast path that would skew its fit).
        if (call == engine::CallShape::decode && c == 0)
          continue;
        points.push_back({call, b, c});
      }
    }
  }
  const auto started = std::chrono::steady_clock::now();
  RunConditions conditions;
  conditions.omp_wait_policy = omp_wait_policy();
  conditions.probe_start = engine::speed_probe(backend);
  // The grid is walked `rounds` times, each time with a share of the repetitions, and each
  // point's median is over all of them: a slow spell of the machine (a few seconds, on a shared
  // VM) then lands in one round of a point, not in all of its repetitions.
  std::vector<std::vector<engine::OpTiming>> timings(points.size());
  engine::OpTimingOptions per_round = args.timing;
  per_round.repetitions = (args.timing.repetitions + args.rounds - 1) / args.rounds;
  ProgressReporter reporter("engine profile-ops", "grid points timed");
  const double grid_total = static_cast<double>(args.rounds) * static_cast<double>(points.size());
  double grid_done = 0;
  for (int round = 0; round < args.rounds; ++round) {
    for (std::size_t i = 0; i < points.size(); ++i) {
      std::vector<engine::OpTiming> taken = engine::time_ops(backend, points[i], per_round);
      reporter.update(++grid_done, grid_total,
                      fmt::format("round {} of {}", round + 1, args.rounds));
      if (timings[i].empty()) {
        timings[i] = std::move(taken);
        continue;
      }
      for (std::size_t k = 0; k < taken.size(); ++k) {
        auto& kept = timings[i][k].times_us;
        kept.insert(kept.end(), taken[k].times_us.begin(), taken[k].times_us.end());
      }
    }
  }
  reporter.finish();
  std::vector<traces::OpGridRow> rows;
  // Per op: the widest relative spread (p90 - p10) / median of any point, and where.
  std::map<std::string, std::pair<double, std::string>> widest;
  for (const std::vector<engine::OpTiming>& at_point : timings) {
    for (const engine::OpTiming& timing : at_point) {
      rows.push_back(grid_row(timing));
      const traces::OpGridRow& row = rows.back();
      const double spread = row.median_us > 0 ? (row.p90_us - row.p10_us) / row.median_us : 0.0;
      auto& [worst, where] = widest[row.op];
      if (spread >= worst) {
        worst = spread;
        where = fmt::format("{} B={} C={}", row.shape, row.batch_tokens, row.context_tokens);
      }
    }
  }
  conditions.probe_end = engine::speed_probe(backend);

  make_output_file_folder(args.out);
  traces::OpGridWriter writer(args.out);
  for (const traces::OpGridRow& row : rows)
    writer.write(row);
  writer.finish();
  write_run_description(backend, conditions, analysis::grid_description_path(args.out));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  fmt::print("model      {} on {}\n", backend.config().shape.name, backend.hardware());
  fmt::print(
      "grid       {} points ({} shapes x {} batch sizes x {} contexts), {} rounds of {} "
      "repetitions after {} warm-up calls each, {:.1f} s\n",
      points.size(), args.shapes.size(), args.batch_tokens.size(), args.contexts.size(),
      args.rounds, per_round.repetitions, args.timing.warmup, seconds);
  fmt::print("speed      probe {:.1f} us before, {:.1f} us after ({:+.1f}%)\n",
             conditions.probe_start.median_us, conditions.probe_end.median_us,
             100 * (conditions.probe_end.median_us / conditions.probe_start.median_us - 1));
  for (const auto& [op, worst] : widest) {
    fmt::print("spread     {:<20} widest p10-p90 {:>6.1f}% of the median (at {})\n", op,
               100 * worst.first, worst.second);
  }
  fmt::print("wrote      {} ({} rows) and {}\n", args.out, rows.size(),
             analysis::grid_description_path(args.out));
}

}  // namespace

void add_profile_ops_command(CLI::App& engine_group) {
  auto args = std::make_shared<ProfileOpsArgs>();
  CLI::App* command = engine_group.add_subcommand(
      "profile-ops",
      "Time every engine op in isolation over a grid of batch tokens x attention context "
      "(median and spread of repeated calls after warm-up), for `exitsim calibrate`");
  args->model.add_to(*command);
  command->add_option("-o,--out", args->out, "The op grid to write (CSV; <name>.run.json beside)")
      ->required();
  command
      ->add_option("--batch-tokens", args->batch_tokens,
                   "Batch tokens per call (default 1,2,4,...,256)")
      ->delimiter(',')
      ->check(CLI::PositiveNumber);
  command
      ->add_option("--contexts", args->contexts,
                   "Cached tokens before each row (default 0,16,64,128,256)")
      ->delimiter(',')
      ->check(CLI::NonNegativeNumber);
  command
      ->add_option("--shapes", args->shapes,
                   "decode (one token per sequence), prefill (one chunk), or both (default)")
      ->delimiter(',')
      ->check(CLI::IsMember({"decode", "prefill"}));
  command->add_option("--repetitions", args->timing.repetitions,
                      "Timed calls per point (default 15)");
  command
      ->add_option("--rounds", args->rounds,
                   "Walks of the grid the repetitions are spread over (default 3)")
      ->check(CLI::Range(1, 100));
  command->add_option("--warmup", args->timing.warmup, "Untimed calls first (default 3)")
      ->check(CLI::NonNegativeNumber);
  command
      ->add_option("--layer", args->timing.layer,
                   "Executed layer to time (default: the shared block's first)")
      ->check(CLI::NonNegativeNumber);
  command->callback([args] { run_profile_ops(*args); });
}

}  // namespace exitsim::cli
