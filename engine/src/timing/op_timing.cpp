#include "exitsim/engine/op_timing.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <random>
#include <thread>

#include "exitsim/core/error.hpp"
#include "exitsim/core/nearest_rank.hpp"
#include "exitsim/engine/hidden_states.hpp"
#include "exitsim/engine/kv_cache.hpp"
#include "exitsim/traces/engine_ops.hpp"

namespace exitsim::engine {

const char* to_string(CallShape shape) {
  return shape == CallShape::decode ? "decode" : "prefill";
}

double OpTiming::percentile_us(double p) const {
  return core::nearest_rank_value(times_us, p);
}

double OpTiming::median_us() const {
  return percentile_us(0.5);
}

namespace {

namespace ops = traces::engine_ops;
using Clock = std::chrono::steady_clock;

double microseconds_since(Clock::time_point start) {
  return std::chrono::duration<double, std::micro>(Clock::now() - start).count();
}

int default_layer(const Backend& backend) {
  const DepthStructure& depth = backend.depth();
  return depth.block_layers > 0 ? depth.prelude_layers : 0;
}

// The rows of one call at `point`, their K/V streams filled with `context_per_row` cached rows of
// random values; every call's own K/V is dropped again after it, so each repetition reads the
// same context.
class CallFixture {
 public:
  CallFixture(const Backend& backend, const OpGridPoint& point, int layer)
      : backend_(backend),
        point_(point),
        layer_(layer),
        states_(backend.make_states()),
        kv_(backend.kv_width(), k_block, blocks_needed(point)) {
    std::mt19937 draws(7);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    const auto width = backend.config().shape.d_model;
    inputs_.resize(point.batch_tokens, width);
    for (Eigen::Index i = 0; i < inputs_.size(); ++i)
      inputs_.data()[i] = normal(draws);
    held_ = HeldStates(*states_, static_cast<std::size_t>(point.batch_tokens));
    const std::int64_t streams = point.shape == CallShape::decode ? point.batch_tokens : 1;
    std::vector<float> key(static_cast<std::size_t>(backend.kv_width()));
    std::vector<float> value(key.size());
    for (std::int64_t s = 0; s < streams; ++s) {
      const int stream = kv_.open_stream();
      streams_.push_back(stream);
      for (std::int64_t p = 0; p < point.context_per_row; ++p) {
        for (std::size_t j = 0; j < key.size(); ++j) {
          key[j] = normal(draws);
          value[j] = normal(draws);
        }
        kv_.append(stream, static_cast<std::int32_t>(p), key, value);
      }
    }
    for (std::int64_t r = 0; r < point.batch_tokens; ++r) {
      LayerRow row;
      const bool decode = point.shape == CallShape::decode;
      row.read_stream = streams_[static_cast<std::size_t>(decode ? r : 0)];
      row.write_stream = row.read_stream;
      row.position = static_cast<std::int32_t>(point.context_per_row + (decode ? 0 : r));
      row.chunk = decode ? -1 : 0;
      rows_.push_back(row);
    }
  }

  // Fresh inputs (a layer call works in place) and the cached context only.
  void reset() {
    states_->write(held_.slots(), inputs_);
    for (const int stream : streams_) {
      if (point_.context_per_row == 0) {
        kv_.truncate_after(stream, -1);
      } else {
        kv_.truncate_after(stream, static_cast<std::int32_t>(point_.context_per_row - 1));
      }
    }
  }

  void layer(profiler::HostProfiler* profiler) {
    backend_.layer(layer_, *states_, held_.slots(), rows_, kv_, {profiler, 0});
  }
  void kv_only(profiler::HostProfiler* profiler) {
    backend_.kv_only(layer_, *states_, held_.slots(), rows_, kv_, {profiler, 0});
  }
  void embed() {
    std::vector<std::int32_t> tokens;
    const auto vocab = backend_.config().shape.vocab;
    for (std::int64_t r = 0; r < point_.batch_tokens; ++r)
      tokens.push_back(static_cast<std::int32_t>(r % vocab));
    backend_.embed(tokens, *states_, held_.slots());
  }
  void lm_head() { (void)backend_.top2(*states_, held_.slots(), false); }

 private:
  static constexpr std::int64_t k_block = 16;
  static std::int64_t blocks_needed(const OpGridPoint& point) {
    const std::int64_t per_stream = point.shape == CallShape::decode
                                        ? point.context_per_row + 1
                                        : point.context_per_row + point.batch_tokens;
    const std::int64_t streams = point.shape == CallShape::decode ? point.batch_tokens : 1;
    return streams * ((per_stream + k_block - 1) / k_block + 1);
  }

  const Backend& backend_;
  OpGridPoint point_;
  int layer_;
  std::unique_ptr<HiddenStates> states_;
  KvCache kv_;
  Matrix inputs_;
  HeldStates held_;
  std::vector<int> streams_;
  std::vector<LayerRow> rows_;
};

void check_point(const Backend& backend, const OpGridPoint& point) {
  if (point.batch_tokens < 1) {
    throw InputError({"", 0, 0, "--batch-tokens"},
                     expected_found("batch tokens >= 1", std::to_string(point.batch_tokens)));
  }
  const std::int64_t last =
      point.context_per_row + (point.shape == CallShape::prefill ? point.batch_tokens : 1);
  if (point.context_per_row < 0 || last > backend.config().max_positions) {
    throw InputError(
        {"", 0, 0, "--contexts"},
        expected_found(fmt::format("a context from 0 that leaves the call within the model's "
                                   "{} positions",
                                   backend.config().max_positions),
                       fmt::format("{} cached + {} {} tokens", point.context_per_row,
                                   point.batch_tokens, to_string(point.shape))));
  }
}

}  // namespace

std::vector<OpTiming> time_ops(const Backend& backend, const OpGridPoint& point,
                               const OpTimingOptions& options) {
  check_point(backend, point);
  const int layer = options.layer >= 0 ? options.layer : default_layer(backend);
  const int recursion = backend.source_of(layer).recursion;
  CallFixture call(backend, point, layer);

  std::map<std::string, OpTiming> by_op;
  std::vector<std::string> order;
  const auto record = [&](const std::string& name, traces::OpKind kind, std::int64_t batch,
                          std::int64_t pairs, double us) {
    auto [it, fresh] = by_op.try_emplace(name);
    if (fresh) {
      order.push_back(name);
      it->second = {name, kind, point.shape, layer, recursion, batch, pairs, {}};
    }
    it->second.times_us.push_back(us);
  };
  const auto is_layer_op = [](std::string_view name) {
    return std::find(ops::layer.begin(), ops::layer.end(), name) != ops::layer.end() ||
           name == ops::kv_only;
  };

  profiler::HostProfiler profiler;
  const auto run_spans = [&](auto&& call_once) {
    for (int rep = -options.warmup; rep < options.repetitions; ++rep) {
      call.reset();
      profiler.clear();
      call_once(rep >= 0 ? &profiler : nullptr);
      if (rep < 0)
        continue;
      for (const traces::OpTraceRow& row : profiler.rows()) {
        if (is_layer_op(row.name)) {
          record(row.name, row.kind, row.batch_tokens, row.context_tokens,
                 static_cast<double>(row.duration_ns) / 1000.0);
        }
      }
    }
  };
  run_spans([&](profiler::HostProfiler* p) { call.layer(p); });
  run_spans([&](profiler::HostProfiler* p) { call.kv_only(p); });

  // The embedding and the LM head work per token, whatever the context: timed at decode points.
  if (point.shape == CallShape::decode) {
    const auto timed = [&](std::string_view name, traces::OpKind kind, auto&& call_once) {
      for (int rep = -options.warmup; rep < options.repetitions; ++rep) {
        const Clock::time_point start = Clock::now();
        call_once();
        const double us = microseconds_since(start);
        if (rep >= 0)
          record(std::string(name), kind, point.batch_tokens, 0, us);
      }
    };
    timed(ops::embed, traces::OpKind::other, [&] { call.embed(); });
    timed(ops::lm_head, traces::OpKind::lm_head, [&] { call.lm_head(); });
  }
  std::vector<OpTiming> out;
  for (const std::string& name : order)
    out.push_back(std::move(by_op[name]));
  return out;
}

SpeedProbe speed_probe(const Backend& backend) {
  const OpGridPoint point{CallShape::decode, 8, 64};
  check_point(backend, point);
  CallFixture call(backend, point, default_layer(backend));
  // Warm for a fixed time, not a fixed count: the first reading of a process also pays for its
  // page faults and the core's clock ramping up, which a handful of calls does not cover.
  const auto warm_until = Clock::now() + std::chrono::milliseconds(k_probe_warmup_ms);
  while (Clock::now() < warm_until) {
    call.reset();
    call.layer(nullptr);
  }
  // Blocks spread over time, each read by its median; the reading is the median block. A
  // slowdown of a few tens of milliseconds (another process's burst, a vCPU descheduled) moves
  // one or two blocks, not the reading.
  OpTiming blocks;
  for (int block = 0; block < k_probe_blocks; ++block) {
    if (block > 0)
      std::this_thread::sleep_for(std::chrono::milliseconds(k_probe_gap_ms));
    OpTiming calls;
    for (int rep = 0; rep < k_probe_calls_per_block; ++rep) {
      call.reset();
      const Clock::time_point start = Clock::now();
      call.layer(nullptr);
      calls.times_us.push_back(microseconds_since(start));
    }
    blocks.times_us.push_back(calls.median_us());
  }
  return {blocks.median_us(), blocks.percentile_us(0.1), blocks.percentile_us(0.9)};
}

}  // namespace exitsim::engine
