// What the passes share: K/V rows of a sequence at a layer, layer calls with their spans, the
// head, sampling, exit decisions taken before a token runs, and emission.
#include <algorithm>
#include <cmath>
#include <limits>

#include "exitsim/engine/cpu_ops.hpp"
#include "exitsim/traces/engine_ops.hpp"
#include "loop.hpp"

namespace exitsim::engine {

void QueueRef::remove(std::span<const std::size_t> sorted_indices) {
  std::size_t write = 0;
  std::size_t next = 0;
  for (std::size_t read = 0; read < views.size(); ++read) {
    if (next < sorted_indices.size() && sorted_indices[next] == read) {
      ++next;
      continue;
    }
    views[write] = views[read];
    sequences[write] = sequences[read];
    ++write;
  }
  views.resize(write);
  sequences.resize(write);
}

LayerRow Engine::Loop::row_for(const Sequence& s, int layer, std::int32_t position) const {
  LayerRow row;
  row.position = position;
  row.read_stream = s.streams[static_cast<std::size_t>(layout_.instance_of(layer))];
  row.write_stream = layout_.writes(layer) ? row.read_stream : -1;
  return row;
}

profiler::HostProfiler::Span Engine::Loop::span(std::string_view name, traces::OpKind kind,
                                                std::int64_t tokens, int layer) {
  if (profiler_ == nullptr)
    return {};
  profiler::SpanShape shape;
  shape.batch_tokens = tokens;
  shape.depth = layer;
  shape.recursion =
      layer >= 0 && layer < model_.executed_layers() ? model_.source_of(layer).recursion : 0;
  shape.step_id = step_;
  return profiler_->span(name, kind, shape);
}

void Engine::Loop::run_layer(int layer, std::span<const StateSlot> slots,
                             std::span<const LayerRow> rows) {
  if (rows.empty())
    return;
  model_.layer(layer, *states_, slots, rows, kv_, {profiler_, step_});
}

HeadOutput Engine::Loop::head(std::span<const StateSlot> slots,
                              std::span<Sequence* const> sequences,
                              std::span<const std::int32_t> positions, bool probe,
                              HeadWants wants) {
  const DepthStructure& depth = model_.depth();
  const int first_coda = depth.stacked_depth();
  // A probe's states keep running after it, so its coda runs on copies; an emitting head's states
  // are done (the next token starts from a fresh embedding).
  HeldStates coda;
  if (probe && depth.coda_layers > 0) {
    coda = HeldStates(*states_, slots.size());
    states_->copy(slots, coda.slots());
    slots = coda.slots();
  }
  std::vector<LayerRow> rows(sequences.size());
  for (int c = 0; c < depth.coda_layers; ++c) {
    for (std::size_t i = 0; i < sequences.size(); ++i) {
      rows[i] = row_for(*sequences[i], first_coda + c, positions[i]);
      rows[i].probe = probe;
    }
    run_layer(first_coda + c, slots, rows);
  }
  return lm_head(slots, probe ? traces::engine_ops::probe : traces::engine_ops::lm_head, wants);
}

HeadOutput Engine::Loop::lm_head(std::span<const StateSlot> slots, std::string_view name,
                                 HeadWants wants) {
  auto timed = span(name, traces::OpKind::lm_head, static_cast<std::int64_t>(slots.size()), -1);
  HeadOutput out;
  if (!wants.logits) {
    out.top = model_.top2(*states_, slots, wants.probabilities);
    return out;
  }
  out.logits = model_.logits(*states_, slots);
  for (std::size_t r = 0; r < slots.size(); ++r)
    out.top.push_back(head_summary(out.logits_of(r), wants.probabilities));
  return out;
}

HeadWants Engine::Loop::emission_wants() const {
  return {.logits = options_.temperature > 0 || static_cast<bool>(options_.observer.on_logits)};
}

std::int32_t Engine::Loop::sample(Sequence& s, const HeadOutput& head, std::size_t row) {
  if (options_.temperature <= 0)
    return static_cast<std::int32_t>(head.top[row].top1_index);
  const std::span<const float> logits = head.logits_of(row);
  const double max = *std::max_element(logits.begin(), logits.end());
  double total = 0;
  for (const float l : logits)
    total += std::exp((l - max) / options_.temperature);
  double draw = s.sampler.uniform() * total;
  for (std::size_t i = 0; i < logits.size(); ++i) {
    draw -= std::exp((logits[i] - max) / options_.temperature);
    if (draw < 0)
      return static_cast<std::int32_t>(i);
  }
  return static_cast<std::int32_t>(logits.size() - 1);
}

std::vector<double> Engine::Loop::route(int recursion, std::span<const StateSlot> slots) {
  const int layer = model_.depth().prelude_layers + (recursion - 1) * model_.depth().block_layers;
  auto timed = span(traces::engine_ops::router, traces::OpKind::router,
                    static_cast<std::int64_t>(slots.size()), layer);
  return model_.router_scores(recursion, *states_, slots);
}

double Engine::Loop::confidence_of(const Top2Confidence& top) const {
  return options_.exit_policy.confidence_measure == "margin" ? top.margin : top.top1_prob;
}

int Engine::Loop::point_at_depth(int depth) const {
  for (std::size_t p = 0; p < exit_depths_.size(); ++p) {
    if (exit_depths_[p] == depth)
      return static_cast<int>(p);
  }
  return -1;
}

void Engine::Loop::decide_upfront(std::span<Sequence* const> sequences, std::span<int> exits) {
  if (exit_policy_ == nullptr) {
    std::fill(exits.begin(), exits.end(), static_cast<int>(exit_depths_.size()) - 1);
    return;
  }
  call_exit_policy(sequences, {}, true, exits);
}

void Engine::Loop::call_exit_policy(std::span<Sequence* const> sequences,
                                    std::span<const std::span<const double>> scores, bool draw,
                                    std::span<int> out) {
  std::vector<policy::ExitToken> tokens(sequences.size());
  std::vector<std::size_t> scratch(sequences.size());
  for (std::size_t i = 0; i < sequences.size(); ++i) {
    Sequence& s = *sequences[i];
    tokens[i] = {
        s.request->id, s.output_position(),
        draw ? policy::exit_uniform(options_.seed, s.request->id, s.output_position()) : 0.0,
        scores.empty() ? std::span<const double>{} : scores[i], &s.exit_quota};
  }
  const std::optional<double> threshold =
      estimator_ ? std::optional<double>(estimator_->threshold()) : std::nullopt;
  exit_policy_->choose_exits({tokens, max_position(), scratch, threshold}, out);
}

void Engine::Loop::count_exit(Sequence& s, int exit_point) const {
  if (exit_policy_ != nullptr && exit_policy_->reads_quota())
    policy::count_exit(s.exit_quota, exit_point, exit_depths_.size());
}

void Engine::Loop::emit(Sequence& s, std::int32_t token, int exit_point, double score,
                        std::span<const float> logits) {
  const std::int64_t position = s.output_position();
  if (options_.observer.on_logits)
    options_.observer.on_logits(s.request->id, position, exit_point, logits);
  if (!s.request->forced.empty())
    token = s.request->forced[static_cast<std::size_t>(position)];
  s.tokens.push_back(token);
  s.emitted = true;
  s.emitted_depth = exit_depths_[static_cast<std::size_t>(exit_point)];
  result_.tokens.push_back({s.request->id, position, token, exit_point,
                            exit_depths_[static_cast<std::size_t>(exit_point)], score, now()});
}

void Engine::Loop::report_kv(const Sequence& s) {
  if (!options_.observer.on_finished_kv)
    return;
  model_.sync_kv(kv_);
  const std::int64_t width = kv_.kv_width();
  for (int layer = 0; layer < model_.executed_layers(); ++layer) {
    if (!layout_.writes(layer))
      continue;
    const int stream = s.streams[static_cast<std::size_t>(layout_.instance_of(layer))];
    const std::int64_t rows = kv_.rows(stream);
    std::vector<std::int32_t> positions(static_cast<std::size_t>(rows));
    std::vector<float> keys(static_cast<std::size_t>(rows * width));
    std::vector<float> values(keys.size());
    for (std::int64_t r = 0; r < rows; ++r) {
      positions[static_cast<std::size_t>(r)] = kv_.position(stream, r);
      std::copy_n(kv_.key(stream, r), width, keys.begin() + r * width);
      std::copy_n(kv_.value(stream, r), width, values.begin() + r * width);
    }
    options_.observer.on_finished_kv(s.request->id, layer, positions, keys, values);
  }
}

HeadOutput Engine::Loop::filled_head(Sequence& s, std::span<const PendingState> filled) {
  std::vector<Sequence*> owners(filled.size(), &s);
  std::vector<StateSlot> slots;
  std::vector<std::int32_t> positions;
  for (const PendingState& p : filled) {
    slots.push_back(p.hidden[0]);
    positions.push_back(p.position);
  }
  // Through the coda as probes (their K/V is there already), but a corrected token's logits go
  // to the observers like any emitted token's.
  return head(slots, owners, positions, true, emission_wants());
}

Correction Engine::Loop::check_filled(Sequence& s, std::span<const PendingState> filled,
                                      const HeadOutput& out) {
  std::vector<std::int32_t> positions;
  for (const PendingState& p : filled)
    positions.push_back(p.position);
  Correction first;
  for (std::size_t k = 0; k < filled.size(); ++k) {
    const auto best = static_cast<std::int32_t>(out.top[k].top1_index);
    const std::int32_t emitted = s.tokens[static_cast<std::size_t>(positions[k]) + 1];
    if (best == emitted)
      continue;
    ++result_.disagreements;
    if (first.position < 0) {
      first.position = positions[k];
      first.token = best;
      const std::span<const float> logits = out.logits_of(k);
      first.logits.assign(logits.begin(), logits.end());
    }
  }
  return first;
}

void Engine::Loop::roll_back(Sequence& s, const Correction& correction) {
  const auto keep = static_cast<std::size_t>(correction.position) + 1;
  const auto discarded = static_cast<std::int64_t>(s.tokens.size() - keep);
  const auto prompt = static_cast<std::int64_t>(s.request->prompt.size());
  const std::int64_t first_discarded_output = static_cast<std::int64_t>(keep) - prompt;
  for (auto it = result_.tokens.rbegin(); it != result_.tokens.rend(); ++it) {
    if (it->request == s.request->id && !it->discarded && it->position >= first_discarded_output)
      it->discarded = true;
  }
  for (const int stream : s.streams)
    kv_.truncate_after(stream, correction.position);
  s.tokens.resize(keep);
  result_.rolled_back_tokens += discarded;
  emit(s, correction.token, static_cast<int>(exit_depths_.size()) - 1,
       std::numeric_limits<double>::quiet_NaN(), correction.logits);
}

}  // namespace exitsim::engine
