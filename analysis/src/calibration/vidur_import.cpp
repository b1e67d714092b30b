// `calibrate --vidur-mlp`: Vidur's public profiles of one model, GPU and TP degree into a cost
// profile (docs/calibration.md, "From Vidur's public profiles").
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

#include "exitsim/analysis/calibrate.hpp"
#include "exitsim/analysis/vidur.hpp"
#include "exitsim/core/error.hpp"
#include "exitsim/core/parallel.hpp"
#include "exitsim/core/presets.hpp"
#include "exitsim/sim/cost/roofline.hpp"
#include "exitsim/traces/engine_ops.hpp"

namespace exitsim::analysis {

namespace ops = traces::engine_ops;

namespace {

constexpr std::string_view k_measured_by_roofline = "roofline";

std::string joined(const std::vector<std::string>& items, std::string_view separator = ", ") {
  std::string out;
  for (const std::string& item : items)
    out += (out.empty() ? "" : std::string(separator)) + item;
  return out;
}

// Vidur names its GPUs a100 and h100; exitsim's presets of them.
std::string hardware_preset_of(const std::string& name, std::vector<std::string>& report) {
  const std::pair<const char*, const char*> vidur_names[] = {{"a100", "a100-80gb"},
                                                             {"h100", "h100-sxm"}};
  for (const auto& [vidur, preset] : vidur_names) {
    if (name == vidur) {
      report.push_back(
          fmt::format("hardware   {} (Vidur's {} is exitsim's {})", preset, vidur, preset));
      return preset;
    }
  }
  if (!find_hardware_preset(name)) {
    throw InputError({"", 0, 0, "--hardware"},
                     expected_found(fmt::format("an exitsim hardware preset ({}; Vidur's a100 is "
                                                "a100-80gb, its h100 h100-sxm)",
                                                joined(hardware_preset_names())),
                                    name.empty() ? "none" : "\"" + name + "\""));
  }
  report.push_back(fmt::format("hardware   {}", name));
  return name;
}

// What differs between Vidur's columns and a model, one "key a (Vidur b)" each.
std::vector<std::string> shape_differences(const vidur::ModelColumns& v, const ModelShape& m) {
  std::vector<std::string> out;
  const auto differ = [&](const char* ours, std::int64_t value, const char* theirs,
                          std::int64_t vidur) {
    if (value != vidur)
      out.push_back(fmt::format("{} {} (Vidur's {} {})", ours, value, theirs, vidur));
  };
  differ("d_model", m.d_model, "n_embd", v.n_embd);
  differ("n_heads", m.n_heads, "n_head", v.n_head);
  differ("n_kv_heads", m.n_kv_heads, "n_kv_head", v.n_kv_head);
  if (v.n_head > 0 && v.n_embd % v.n_head == 0)
    differ("head_dim", m.head_dim, "n_embd / n_head", v.n_embd / v.n_head);
  differ("ffn_dim", m.ffn_dim, "n_expanded_embd", v.n_expanded_embd);
  if ((m.mlp == MlpKind::gated) != v.gated) {
    out.push_back(fmt::format("mlp {} (Vidur's use_gated_mlp {})",
                              m.mlp == MlpKind::gated ? "gated" : "plain",
                              v.gated ? "True" : "False"));
  }
  if (m.experts > 0)
    out.push_back(fmt::format("{} experts (Vidur's profiles are of dense models)", m.experts));
  return out;
}

std::string shape_text(const vidur::ModelColumns& v) {
  return fmt::format("n_embd {}, n_head {}, n_kv_head {}, n_expanded_embd {}, use_gated_mlp {}",
                     v.n_embd, v.n_head, v.n_kv_head, v.n_expanded_embd,
                     v.gated ? "True" : "False");
}

// The preset named, whose shape must be the profile's (vocab aside: only `emb` reads it, and a
// gather's time does not depend on the table's rows).
ModelShape model_preset_of(const std::string& name, const std::string& mlp_path,
                           const vidur::ModelColumns& columns, std::vector<std::string>& report) {
  std::vector<std::string> same_shape;
  for (const std::string& preset : model_preset_names()) {
    if (shape_differences(columns, *find_model_preset(preset)).empty())
      same_shape.push_back(preset);
  }
  const std::string matching =
      same_shape.empty() ? fmt::format("no exitsim preset has Vidur's shape ({}); presets: {}",
                                       shape_text(columns), joined(model_preset_names()))
                         : fmt::format("presets of Vidur's shape: {}", joined(same_shape));
  const std::optional<ModelShape> model = find_model_preset(name);
  if (!model) {
    throw InputError(
        {"", 0, 0, "--model-name"},
        expected_found("an exitsim model preset of the profile's shape (" + matching + ")",
                       name.empty() ? "none" : "\"" + name + "\""));
  }
  const std::vector<std::string> differences = shape_differences(columns, *model);
  if (!differences.empty()) {
    throw InputError({mlp_path, 0, 0, "--model-name"},
                     expected_found("a model of Vidur's shape (" + matching + ")",
                                    fmt::format("{} with {}", name, joined(differences))));
  }
  std::string vocab;
  if (model->vocab != columns.vocab_size) {
    vocab = fmt::format(
        "; vocab {} here, {} in Vidur's config: only emb reads it, and a gather's time does not "
        "depend on the table's rows",
        model->vocab, columns.vocab_size);
  }
  report.push_back(
      fmt::format("model      {} has Vidur's shape ({}){}", name, shape_text(columns), vocab));
  return *model;
}

using vidur::Mean;

// Samples in ascending (batch, context), duplicated points averaged (Vidur times some twice).
std::vector<OpSample> averaged(const std::map<std::pair<double, double>, Mean>& points) {
  std::vector<OpSample> out;
  for (const auto& [key, mean] : points)
    out.push_back({key.first, key.second, mean.value()});
  return out;
}

std::string tp_list(const std::vector<int>& tps) {
  std::vector<std::string> names;
  for (const int tp : tps)
    names.push_back(std::to_string(tp));
  return names.empty() ? "none" : joined(names);
}

// Causal (query, key) pairs of a chunk of q queries after c cached tokens, as exitsim counts them.
double prefill_pairs(double q, double c) {
  return q * c + q * (q + 1) / 2;
}

// |prediction - time| / time per sample, times floored as the fits floor them (0.05 us).
std::vector<double> errors(const sim::OpFit& fit, const std::vector<OpSample>& samples) {
  std::vector<double> out;
  for (const OpSample& s : samples) {
    const double t = std::max(s.time_us, 0.05);
    out.push_back(std::abs(fit.predict_us(s.batch, s.context) - t) / t);
  }
  return out;
}
double mean_of(const std::vector<double>& v) {
  double sum = 0;
  for (const double x : v)
    sum += x;
  return v.empty() ? 0 : sum / static_cast<double>(v.size());
}
double median_of(std::vector<double> v) {
  if (v.empty())
    return 0;
  const auto mid = v.begin() + static_cast<std::ptrdiff_t>((v.size() - 1) / 2);
  std::nth_element(v.begin(), mid, v.end());
  return *mid;
}

// A grid's fit with one regime per octave of the batch (up to 1, 2, 4, ...): each regime fitted
// by fit_op (no knee) to the grid points from the octave's lower bound to its upper one, so that
// neighbouring regimes meet near their shared point and a small octave of two points is their
// line. An octave with fewer than two batch sizes joins the next. Vidur's grids are dense (259
// token counts, 128 decode batches), and one line or two over 1-4096 tokens missed decode-sized
// GEMMs by up to 20%. Every `hold_out_every`-th point (by batch) is held out of the fits and
// measures their error.
sim::OpFit fit_octaves(std::string_view name, const char* kind, std::vector<OpSample> samples,
                       const CalibrationOptions& options) {
  std::sort(samples.begin(), samples.end(), [](const OpSample& a, const OpSample& b) {
    return std::pair(a.batch, a.context) < std::pair(b.batch, b.context);
  });
  std::vector<OpSample> train;
  std::vector<OpSample> held;
  const int every = options.hold_out_every;
  for (std::size_t i = 0; i < samples.size(); ++i) {
    const bool hold = every > 1 && samples.size() >= 10 &&
                      static_cast<int>(i % static_cast<std::size_t>(every)) == every - 1;
    (hold ? held : train).push_back(samples[i]);
  }
  CalibrationOptions segment = options;
  segment.hold_out_every = 0;
  segment.knee_gain = 0;  // one line per octave
  segment.match_total = false;

  sim::OpFit fit;
  fit.name = std::string(name);
  fit.kind = kind;
  double low = -1;  // the octave's lower bound (its points are shared with the one below)
  double previous_low = -1;
  std::int64_t high = 1;
  const double largest = train.back().batch;
  for (;; high *= 2) {
    const bool last = static_cast<double>(high) >= largest;
    std::vector<OpSample> part;
    std::vector<double> batches;
    for (const OpSample& s : train) {
      if (s.batch >= low && (last || s.batch <= static_cast<double>(high))) {
        part.push_back(s);
        if (batches.empty() || batches.back() != s.batch)
          batches.push_back(s.batch);
      }
    }
    if (batches.size() < 2 && !last)
      continue;
    if (!part.empty()) {
      sim::OpFit line = fit_op(fit.name, kind, part, segment);
      // An octave whose points leave a term undetermined (a batch measured at one context
      // only) is fitted together with the octave below.
      if (!line.undetermined_terms.empty() && !fit.regimes.empty()) {
        std::vector<OpSample> wider;
        for (const OpSample& s : train) {
          if (s.batch >= previous_low && (last || s.batch <= static_cast<double>(high)))
            wider.push_back(s);
        }
        line = fit_op(fit.name, kind, wider, segment);
        fit.regimes.pop_back();
        low = previous_low;
      }
      fit.regimes.push_back({high, line.regimes.front().coefficients});
      for (const std::string& term : line.undetermined_terms) {
        if (std::find(fit.undetermined_terms.begin(), fit.undetermined_terms.end(), term) ==
            fit.undetermined_terms.end())
          fit.undetermined_terms.push_back(term);
      }
    }
    previous_low = low;
    low = static_cast<double>(high);
    if (last)
      break;
  }
  fit.batch_min_seen = static_cast<std::int64_t>(samples.front().batch);
  fit.batch_max_seen = static_cast<std::int64_t>(std::ceil(samples.back().batch));
  for (const OpSample& s : samples)
    fit.context_max_seen = std::max(fit.context_max_seen, static_cast<std::int64_t>(s.context));
  fit.regimes.back().batch_max = std::max(fit.regimes.back().batch_max, fit.batch_max_seen);
  fit.samples = static_cast<std::int64_t>(train.size());
  fit.held_out = static_cast<std::int64_t>(held.size());
  const std::vector<double> fitted = errors(fit, train);
  const std::vector<double> kept_out = errors(fit, held.empty() ? train : held);
  fit.fit_mape = mean_of(fitted);
  fit.fit_median_ape = median_of(fitted);
  fit.held_out_mape = mean_of(kept_out);
  fit.held_out_median_ape = median_of(kept_out);
  return fit;
}

class Importer {
 public:
  Importer(const VidurInputs& inputs, const CalibrationOptions& options)
      : inputs_(inputs), options_(options) {
    options_.match_total = false;  // grid medians, not calls to sum
  }

  VidurCalibration run() {
    const std::string hardware_name = hardware_preset_of(inputs_.hardware, out_.report);
    const HardwareSpec hardware = *find_hardware_preset(hardware_name);
    const vidur::MlpProfile mlp = vidur::read_mlp(inputs_.mlp);
    model_ = model_preset_of(inputs_.model, inputs_.mlp, mlp.model, out_.report);
    tp_ = inputs_.tensor_parallel;
    const ParallelSpec parallel{tp_, 1, 1};
    if (const auto problem = find_parallel_problem(model_, parallel, hardware))
      throw InputError({"", 0, 0, "--tensor-parallel"}, problem->message);
    roofline_.emplace(model_, hardware, sim::RooflineEfficiency{}, parallel);
    // An element-wise copy's rates, as the roofline prices element-wise kernels.
    const double elementwise = hardware.kernels.elementwise_efficiency > 0
                                   ? hardware.kernels.elementwise_efficiency
                                   : sim::RooflineEfficiency{}.bandwidth;
    bandwidth_ = hardware.memory_bandwidth * elementwise;
    launch_us_ = static_cast<double>(hardware.launch_overhead) * 1e-3 +
                 hardware.kernels.min_kernel_ns * 1e-3;

    sim::ProfileSource& source = out_.profile.source;
    source.engine = "vidur";
    source.backend = "cuda";
    source.hardware = hardware_name;
    source.model = model_.name;
    source.model_shape = sim::model_fingerprint(model_);
    source.tensor_parallel = tp_;
    for (const std::string* path :
         {&inputs_.mlp, &inputs_.attention, &inputs_.all_reduce, &inputs_.send_recv}) {
      if (!path->empty())
        source.traces.push_back(*path);
    }

    import_mlp(mlp);
    if (inputs_.attention.empty())
      attention_from_roofline();
    else
      import_attention();
    roofline_head_ops();
    import_network();
    out_.report.push_back(
        "residual   step.residual: Vidur times GPU kernels only and the roofline has no host "
        "time: not in the profile, priced as 0 (scheduling, sampling's host side and gaps "
        "between kernels are missing)");
    std::sort(out_.profile.ops.begin(), out_.profile.ops.end(),
              [](const sim::OpFit& a, const sim::OpFit& b) { return a.name < b.name; });
    return std::move(out_);
  }

 private:
  void add_fit(std::string_view name, const char* kind, const std::vector<OpSample>& samples,
               bool roofline) {
    sim::OpFit fit = fit_octaves(name, kind, samples, options_);
    fit.measured_by = roofline ? std::string(k_measured_by_roofline) : "grid";
    out_.profile.ops.push_back(std::move(fit));
  }

  void import_mlp(const vidur::MlpProfile& mlp) {
    std::vector<int> tps;
    std::map<std::int64_t, std::map<std::string, Mean>> by_tokens;
    for (const vidur::ComputeTime& t : mlp.times) {
      if (std::find(tps.begin(), tps.end(), t.tensor_parallel) == tps.end())
        tps.push_back(t.tensor_parallel);
      if (t.tensor_parallel == tp_)
        by_tokens[t.tokens][t.op].add(t.median_us);
    }
    std::sort(tps.begin(), tps.end());
    if (by_tokens.empty()) {
      throw InputError({inputs_.mlp, 0, 0, "num_tensor_parallel_workers"},
                       expected_found(fmt::format("rows at --tensor-parallel {}", tp_),
                                      fmt::format("rows at TP {} only", tp_list(tps))));
    }
    // exitsim's op = the sum of Vidur's ops, per token count.
    const std::vector<std::pair<std::string_view, std::vector<std::string>>> mapping = {
        {ops::attn_norm, {"input_layernorm", "add"}},
        {ops::qkv_proj, {"attn_pre_proj"}},
        {ops::rotary, {"attn_rope"}},
        {ops::o_proj, {"attn_post_proj"}},
        {ops::mlp_norm, {"post_attention_layernorm", "add"}},
        {ops::mlp_gate_up, {"mlp_up_proj"}},
        {ops::mlp_act, {"mlp_act"}},
        {ops::mlp_down, {"mlp_down_proj"}},
        {ops::embed, {"emb"}}};
    const std::map<std::string_view, const char*> kinds = {
        {ops::attn_norm, "norm"},      {ops::qkv_proj, "gemm"}, {ops::rotary, "elementwise"},
        {ops::o_proj, "gemm"},         {ops::mlp_norm, "norm"}, {ops::mlp_gate_up, "gemm"},
        {ops::mlp_act, "elementwise"}, {ops::mlp_down, "gemm"}, {ops::embed, "other"}};
    for (const auto& [name, vidur_ops] : mapping) {
      std::vector<OpSample> samples;
      for (const auto& [tokens, times] : by_tokens) {
        double us = 0;
        for (const std::string& op : vidur_ops) {
          const auto it = times.find(op);
          if (it == times.end()) {
            throw InputError(
                {inputs_.mlp, 0, 0, "time_stats." + op + ".median"},
                expected_found(fmt::format("a time of Vidur's {} (exitsim's {})", op, name),
                               "no such column"));
          }
          us += it->second.value();
        }
        samples.push_back({static_cast<double>(tokens), 0, us});
      }
      add_fit(name, kinds.at(name), samples, false);
    }
    tokens_.clear();
    for (const auto& entry : by_tokens)
      tokens_.push_back(static_cast<double>(entry.first));
    out_.report.push_back(fmt::format(
        "vidur      {}: {} token counts {}-{} at TP {} (the file has TP {})", inputs_.mlp,
        by_tokens.size(), by_tokens.begin()->first, by_tokens.rbegin()->first, tp_, tp_list(tps)));
    out_.report.push_back(
        "mapping    qkv_proj = attn_pre_proj; rotary = attn_rope (vLLM runs rotary as its own "
        "kernel after the QKV GEMM, as exitsim's engine runs its rotary op); o_proj = "
        "attn_post_proj; mlp.gate_up = mlp_up_proj; mlp.act = mlp_act; mlp.down = "
        "mlp_down_proj; embed = emb");
    out_.report.push_back(
        "mapping    attn_norm = input_layernorm + add; mlp_norm = post_attention_layernorm + add: "
        "exitsim's norm is a fused residual add + RMSNorm, and a layer runs two residual adds; "
        "Vidur times one (after the MLP; the one after attention is the same T x d_model add, "
        "untimed), so its time is added to both norms");
  }

  void import_attention() {
    const std::vector<vidur::AttentionTime> rows = vidur::read_attention(inputs_.attention);
    std::vector<int> tps;
    std::map<std::pair<double, double>, Mean> decode, prefill, save, save_prefill;
    bool checked = false;
    for (const vidur::AttentionTime& r : rows) {
      if (std::find(tps.begin(), tps.end(), r.tensor_parallel) == tps.end())
        tps.push_back(r.tensor_parallel);
      if (r.tensor_parallel != tp_)
        continue;
      if (!checked) {
        checked = true;
        std::vector<std::string> differ;
        if (r.n_embd != model_.d_model)
          differ.push_back(fmt::format("n_embd {}", r.n_embd));
        if (r.n_q_head != model_.n_heads)
          differ.push_back(fmt::format("n_q_head {}", r.n_q_head));
        if (r.n_kv_head != model_.n_kv_heads)
          differ.push_back(fmt::format("n_kv_head {}", r.n_kv_head));
        if (!differ.empty()) {
          throw InputError(
              {inputs_.attention, 0, 0, "--model-name"},
              expected_found(
                  fmt::format("attention of {}'s shape (n_embd {}, n_q_head {}, "
                              "n_kv_head {})",
                              model_.name, model_.d_model, model_.n_heads, model_.n_kv_heads),
                  joined(differ)));
        }
      }
      const double us = r.median_us + r.reshape_us;
      const auto b = static_cast<double>(r.batch_size);
      const auto c = static_cast<double>(r.kv_cache);
      if (r.prefill) {
        const auto q = static_cast<double>(r.prefill_chunk);
        const std::pair<double, double> key{b * q, b * prefill_pairs(q, c)};
        prefill[key].add(us);
        if (r.kv_save_us > 0)
          save_prefill[key].add(r.kv_save_us);
      } else {
        // Each of the b sequences reads its c cached keys and its own.
        const std::pair<double, double> key{b, b * (c + 1)};
        decode[key].add(us);
        if (r.kv_save_us > 0)
          save[key].add(r.kv_save_us);
      }
    }
    std::sort(tps.begin(), tps.end());
    if (decode.empty() || prefill.empty()) {
      throw InputError(
          {inputs_.attention, 0, 0, "num_tensor_parallel_workers"},
          expected_found(fmt::format("decode and prefill rows at --tensor-parallel {}", tp_),
                         fmt::format("{} decode and {} prefill points (the file has "
                                     "TP {})",
                                     decode.size(), prefill.size(), tp_list(tps))));
    }
    add_fit(ops::attention, "attention", averaged(decode), false);
    add_fit(std::string(ops::attention) + std::string(ops::prefill_suffix), "attention",
            averaged(prefill), false);
    out_.report.push_back(fmt::format(
        "attention  {}: attention = attn_decode + attn_input_reshape + attn_output_reshape at "
        "{} (batch, context) points (batch B sequences after C cached tokens, context B x (C + "
        "1) pairs); attention.prefill = attn_prefill + reshapes at {} points (a chunk of P "
        "tokens after C: P x C + P(P + 1)/2 pairs)",
        inputs_.attention, decode.size(), prefill.size()));
    if (!save.empty()) {
      add_fit(ops::kv_write, "memcpy", averaged(save), false);
      if (!save_prefill.empty()) {
        add_fit(std::string(ops::kv_write) + std::string(ops::prefill_suffix), "memcpy",
                averaged(save_prefill), false);
      }
      out_.report.push_back("kv_write   = attn_kv_cache_save");
      return;
    }
    // Vidur's older attention files time the kernel without the cache write: the roofline's
    // memory rule prices it (K and V of each new token read from the QKV output and written
    // into the cache).
    std::vector<OpSample> writes;
    const double bytes =
        2.0 *
        static_cast<double>(TensorShard::of(model_, tp_).kv_bytes_per_token_per_layer(model_));
    for (const double t : tokens_)
      writes.push_back({t, 0, launch_us_ + t * bytes / bandwidth_ * 1e6});
    add_fit(ops::kv_write, "memcpy", writes, true);
    out_.report.push_back(
        "kv_write   not in the attention file (no attn_kv_cache_save column): fitted to the "
        "roofline's rule for an element-wise kernel, each new token's K and V read and written "
        "once at hardware.elementwise_efficiency's share of the bandwidth, plus the minimum "
        "kernel time and a launch");
  }

  void attention_from_roofline() {
    std::vector<OpSample> decode;
    std::vector<OpSample> prefill;
    const double max_context = static_cast<double>(std::max<std::int64_t>(model_.max_context, 128));
    std::vector<double> contexts;
    for (double c = 64; c <= max_context; c *= 2)
      contexts.push_back(c);
    for (double b = 1; b <= 256; b *= 2) {
      for (const double c : contexts) {
        sim::BatchFeatures x{};
        x[feature(sim::BatchFeature::tokens)] = b;
        x[feature(sim::BatchFeature::decode_seqs)] = b;
        x[feature(sim::BatchFeature::decode_kv)] = b * (c + 1);
        decode.push_back({b, b * (c + 1), us_of(sim::OpKind::attention_decode, x)});
      }
    }
    // Every chunk after four contexts, so that the fit's batch x context term is determined (the
    // roofline's price of a chunk past the model's context is a price all the same).
    for (double q = 16; q <= 4096; q *= 2) {
      for (const double c : {0.0, 512.0, 1024.0, 2048.0}) {
        sim::BatchFeatures x{};
        x[feature(sim::BatchFeature::tokens)] = q;
        x[feature(sim::BatchFeature::prefill_tokens)] = q;
        x[feature(sim::BatchFeature::prefill_pairs)] = prefill_pairs(q, c);
        x[feature(sim::BatchFeature::prefill_kv)] = c + q;
        prefill.push_back({q, prefill_pairs(q, c), us_of(sim::OpKind::attention_prefill, x)});
      }
    }
    add_fit(ops::attention, "attention", decode, true);
    add_fit(std::string(ops::attention) + std::string(ops::prefill_suffix), "attention", prefill,
            true);
    // The roofline's attention op writes the new tokens' K and V itself.
    sim::OpFit none;
    none.name = std::string(ops::kv_write);
    none.kind = "memcpy";
    none.regimes = {{static_cast<std::int64_t>(tokens_.back()), {}}};
    none.batch_min_seen = static_cast<std::int64_t>(tokens_.front());
    none.batch_max_seen = static_cast<std::int64_t>(tokens_.back());
    none.context_max_seen = 0;
    none.measured_by = std::string(k_measured_by_roofline);
    out_.profile.ops.push_back(none);
    out_.report.push_back(fmt::format(
        "attention  no attention file given: attention and attention.prefill fitted to the "
        "roofline's prices on {} at TP {} (decode: batches 1-256 x contexts 64-{}; prefill: "
        "chunks 16-4096 after 0-2048 cached tokens); kv_write priced as 0, since the roofline's "
        "attention writes the K/V",
        out_.profile.source.hardware, tp_, static_cast<std::int64_t>(contexts.back())));
  }

  // The LM head, sampling and state_copy's K/V projection: Vidur does not time them.
  void roofline_head_ops() {
    std::vector<OpSample> head, sampling, kv_only;
    for (const double t : tokens_) {
      sim::BatchFeatures x{};
      x[feature(sim::BatchFeature::tokens)] = t;
      x[feature(sim::BatchFeature::emitting)] = t;
      // The engine's lm_head op holds the final norm too.
      head.push_back({t, 0, us_of(sim::OpKind::final_norm, x) + us_of(sim::OpKind::lm_head, x)});
      sampling.push_back({t, 0, us_of(sim::OpKind::sampling, x)});
      sim::BatchFeatures kv{};
      kv[feature(sim::BatchFeature::kv_only_tokens)] = t;
      kv_only.push_back({t, 0, us_of(sim::OpKind::kv_projection, kv)});
    }
    add_fit(ops::lm_head, "lm_head", head, true);
    add_fit(ops::sampling, "sampling", sampling, true);
    add_fit(ops::kv_only, "gemm", kv_only, true);
    out_.report.push_back(fmt::format(
        "roofline   lm_head (final norm + LM head{}), sampling and state_copy.kv_proj (K/V of "
        "copied states, weights read with the layer's QKV): Vidur does not time them; fitted to "
        "the roofline's prices over the same token counts (measured_by roofline)",
        tp_ > 1 ? fmt::format(", one GPU's 1/{} of the vocabulary", tp_) : ""));
  }

  void import_network() {
    const double activation_bytes =
        static_cast<double>(model_.d_model) * static_cast<double>(bytes_per_element(model_.dtype));
    if (!inputs_.all_reduce.empty()) {
      if (tp_ == 1) {
        out_.report.push_back("network    " + inputs_.all_reduce +
                              ": not used at TP 1 (no all-reduce)");
      } else {
        std::map<std::pair<double, double>, Mean> points;
        std::vector<std::string> seen;
        for (const vidur::NetworkTime& r : vidur::read_network(inputs_.all_reduce)) {
          if (r.collective != "all_reduce")
            continue;
          const std::string group =
              fmt::format("{} GPUs {} per node", r.workers, r.devices_per_node);
          if (std::find(seen.begin(), seen.end(), group) == seen.end())
            seen.push_back(group);
          // Within one node, as TP runs.
          if (r.workers == tp_ && r.devices_per_node == r.workers)
            points[{static_cast<double>(r.size_bytes) / activation_bytes, 0}].add(r.median_us);
        }
        if (points.empty()) {
          throw InputError(
              {inputs_.all_reduce, 0, 0, "num_workers"},
              expected_found(fmt::format("all_reduce rows of {} GPUs in one node (num_workers = "
                                         "devices_per_node = {})",
                                         tp_, tp_),
                             seen.empty() ? std::string("no all_reduce rows") : joined(seen)));
        }
        add_fit(ops::tp_all_reduce, "collective", averaged(points), false);
        out_.report.push_back(fmt::format(
            "network    tp_all_reduce = all_reduce of {} GPUs in one node, {} sizes; batch = "
            "tokens = size / (d_model x {} bytes)",
            tp_, points.size(), bytes_per_element(model_.dtype)));
      }
    } else if (tp_ > 1) {
      out_.report.push_back(
          "network    no all_reduce file: simulations price tp_all_reduce by the roofline");
    }
    if (inputs_.send_recv.empty()) {
      out_.report.push_back(
          "network    no send_recv file: pipeline-parallel simulations price hand-offs by the "
          "roofline");
      return;
    }
    std::map<std::pair<double, double>, Mean> local, remote;
    for (const vidur::NetworkTime& r : vidur::read_network(inputs_.send_recv)) {
      if (r.collective != "send_recv" || r.workers != 2)
        continue;
      // A hand-off sends each token's hidden state and residual (2 x d_model values).
      const std::pair<double, double> key{
          static_cast<double>(r.size_bytes) / (2 * activation_bytes), 0};
      (r.devices_per_node == 1 ? remote : local)[key].add(r.median_us);
    }
    if (local.empty() && remote.empty()) {
      throw InputError({inputs_.send_recv, 0, 0, "num_workers"},
                       expected_found("send_recv rows of 2 GPUs", "none"));
    }
    if (!local.empty())
      add_fit(ops::pp_send_recv, "collective", averaged(local), false);
    if (!remote.empty())
      add_fit(ops::pp_send_recv_remote, "collective", averaged(remote), false);
    out_.report.push_back(fmt::format(
        "network    pp_send_recv = send_recv of 2 GPUs in one node ({} sizes), "
        "pp_send_recv.remote = on two nodes ({} sizes); batch = tokens = size / (2 x d_model x "
        "{} bytes): a hand-off sends each token's hidden state and residual, as exitsim's "
        "roofline does",
        local.size(), remote.size(), bytes_per_element(model_.dtype)));
  }

  static std::size_t feature(sim::BatchFeature f) { return sim::feature_index(f); }
  double us_of(sim::OpKind kind, const sim::BatchFeatures& x) const {
    return roofline_->op_cost(kind, x).duration_ns * 1e-3;
  }

  const VidurInputs& inputs_;
  CalibrationOptions options_;
  VidurCalibration out_;
  ModelShape model_;
  int tp_ = 1;
  std::optional<sim::RooflineCostModel> roofline_;
  double bandwidth_ = 0;        // bytes/s an element-wise kernel reaches
  double launch_us_ = 0;        // a kernel's launch and minimum time
  std::vector<double> tokens_;  // the mlp file's token counts at the TP, ascending
};

}  // namespace

VidurCalibration calibrate_vidur(const VidurInputs& inputs, const CalibrationOptions& options) {
  if (inputs.tensor_parallel < 1) {
    throw InputError({"", 0, 0, "--tensor-parallel"},
                     expected_found("a degree >= 1", std::to_string(inputs.tensor_parallel)));
  }
  return Importer(inputs, options).run();
}

}  // namespace exitsim::analysis
