// Reads a decoder's layers out of one step's operators, in order: each layer starts at its q/k/v
// projections (projections of d_model inputs followed by an attention), its MLP runs from the
// first projection of d_model inputs after the output projection up to its last projection (or
// fused experts kernel) before the next layer; what lies between is the norms'
// (docs/calibration.md, "How operators become the model's ops", has the rules and what they cannot
// map).
#include "kineto_layers.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace exitsim::analysis::kineto {
namespace {

// Walking back from the attention: views (and the grouped-query head expansion) join the
// attention, the run of cache writes is the K/V write, the rest is rotary (and a QK-norm).
void split_rotary(std::vector<const Operator*>& pending, Layer& layer) {
  const auto is_view = [](const Operator* op) { return role_of(op->name) == Role::view; };
  const auto is_write = [](const Operator* op) { return role_of(op->name) == Role::kv_write; };
  std::size_t end = pending.size();
  while (end > 0 && is_view(pending[end - 1]))
    --end;
  std::size_t begin = end;
  while (begin > 0 && (is_write(pending[begin - 1]) || is_view(pending[begin - 1])))
    --begin;
  while (begin < end && !is_write(pending[begin]))
    ++begin;  // views before the first write stay with the rotary
  const auto at = [&](std::size_t i) { return pending.begin() + static_cast<std::ptrdiff_t>(i); };
  auto& r = layer.groups[rotary];
  r.insert(r.end(), pending.begin(), at(begin));
  layer.groups[kv_write].assign(at(begin), at(end));
  auto& a = layer.groups[attention];
  a.insert(a.end(), at(end), pending.end());
  pending.clear();
}

// What a layer's shape is made of, to tell layers shaped alike: the q/k/v and output widths, the
// attention's heads, and the MLP's (a dense one's projections; a mixture's router and expert).
std::vector<std::int64_t> signature(const Layer& l) {
  std::vector<std::int64_t> s;
  for (const Projection& p : l.qkv)
    s.push_back(p.out);
  s.insert(s.end(), {l.o_proj.in, l.attention.heads, l.attention.head_dim, l.mixture() ? 1 : 0,
                     l.fused_experts != nullptr ? 1 : 0, l.split ? 1 : 0});
  if (l.mixture()) {
    s.push_back(l.ups.empty() ? 0 : l.ups.front().out);  // the router's experts
    s.push_back(l.ups.size() > 1 ? l.ups[1].out : 0);    // one expert's width
  } else {
    for (const Projection& p : l.ups)
      s.push_back(p.out);
    s.push_back(l.downs.empty() ? 0 : l.downs.front().in);
  }
  return s;
}

class StepMapper {
 public:
  StepMapper(const Operator* embedding, const StepHints& hints)
      : d_(embedding->input_dims[0][1]), vocab_(embedding->input_dims[0][0]), hints_(hints) {
    step_.embedding = embedding;
  }

  Step map(std::span<const Operator* const> ops) {
    for (std::size_t i = 0; i < ops.size() && step_.skip == Skip::none; ++i)
      visit(ops, i);
    if (step_.skip == Skip::none)
      finish();
    if (step_.skip != Skip::none)
      step_.unmapped.insert(step_.unmapped.end(), pending_.begin(), pending_.end());
    return std::move(step_);
  }

 private:
  enum class State : std::uint8_t { seek_layer, qkv, attention, mlp_norm, mlp, sampling };

  bool from_d(const std::optional<Projection>& p) const { return p && p->in == d_; }
  bool is_head(const std::optional<Projection>& p) const { return from_d(p) && p->out == vocab_; }

  void visit(std::span<const Operator* const> ops, std::size_t i) {
    const Operator* op = ops[i];
    const std::optional<Projection> p = projection(*op);
    const Role role = role_of(op->name);
    switch (state_) {
      case State::seek_layer:
        if (is_head(p))
          take_head(op, *p);
        else if (from_d(p))
          start_layer(op, *p);
        else
          pending_.push_back(op);
        break;
      case State::qkv:
        read_qkv(op, p);
        break;
      case State::attention:
        if (p) {
          layer_.groups[o_proj].push_back(op);
          layer_.o_proj = *p;
          state_ = State::mlp_norm;
        } else {
          layer_.groups[attention].push_back(op);
        }
        break;
      case State::mlp_norm:
        if (role == Role::all_reduce) {
          layer_.all_reduces.push_back(op);
        } else if (from_d(p) || role == Role::fused_experts) {
          layer_.groups[mlp_norm] = std::move(pending_);
          pending_.clear();
          mlp_ops_.push_back(op);
          state_ = State::mlp;
        } else {
          pending_.push_back(op);
        }
        break;
      case State::mlp:
        if (is_head(p)) {
          close_layer();
          take_head(op, *p);
        } else if (from_d(p) && starts_layer(ops, i)) {
          close_layer();
          start_layer(op, *p);
        } else if (role == Role::all_reduce) {
          layer_.all_reduces.push_back(op);
        } else {
          mlp_ops_.push_back(op);
        }
        break;
      case State::sampling:
        // The logits' gather of a vocabulary-parallel head (TP) is the head's.
        if (role == Role::gather && step_.sampling.empty())
          step_.lm_head.push_back(op);
        else
          step_.sampling.push_back(op);
        break;
    }
  }

  void read_qkv(const Operator* op, const std::optional<Projection>& p) {
    if (first_custom_ == nullptr && is_framework_op(op->name))
      first_custom_ = op;
    if (from_d(p)) {
      auto& r = layer_.groups[rotary];
      r.insert(r.end(), pending_.begin(), pending_.end());
      pending_.clear();
      layer_.groups[qkv_proj].push_back(op);
      layer_.qkv.push_back(*p);
      return;
    }
    const AttentionReading reading = attention_core(*op, layer_.tokens, layer_.qkv, hints_);
    if (reading.attention) {
      split_rotary(pending_, layer_);
      layer_.attention = *reading.attention;
      layer_.groups[attention].push_back(op);
      state_ = State::attention;
    } else if (!reading.problem.empty()) {
      skip(Skip::unreadable_attention, op, reading.problem);
    } else if (p) {
      // A projection back to d_model before any attention: the attention was an operator this
      // mapping does not know, most likely the first framework operator since the projections.
      skip(Skip::unknown_attention, first_custom_ != nullptr ? first_custom_ : op, "");
    } else {
      pending_.push_back(op);
    }
  }

  // Whether the projection of d_model inputs at `i` starts the next layer: an attention follows
  // before any projection back to d_model (an MLP's down), the LM head or fused experts.
  bool starts_layer(std::span<const Operator* const> ops, std::size_t i) const {
    for (std::size_t j = i + 1; j < ops.size(); ++j) {
      const std::optional<Projection> p = projection(*ops[j]);
      if (p && (p->in != d_ || p->out == vocab_))
        return false;
      if (p)
        continue;
      const Role role = role_of(ops[j]->name);
      if (role == Role::fused_experts)
        return false;
      if (role == Role::attention || is_batched_product(*ops[j]))
        return true;
    }
    return false;
  }

  void start_layer(const Operator* op, const Projection& p) {
    layer_ = Layer{};
    layer_.start_us = op->start_us;
    layer_.tokens = p.tokens;
    split_norm();
    layer_.groups[qkv_proj].push_back(op);
    layer_.qkv.push_back(p);
    first_custom_ = nullptr;
    state_ = State::qkv;
  }

  // Before the first layer, the step's set-up (positions, rotary tables, masks, a vocabulary-
  // parallel embedding's all-reduce) precedes the norm: the norm starts at the first norm kernel,
  // else at the first operator on the hidden states ([..., d_model]).
  void split_norm() {
    auto first = pending_.begin();
    if (step_.layers.empty()) {
      first = std::find_if(pending_.begin(), pending_.end(),
                           [](const Operator* op) { return role_of(op->name) == Role::norm; });
      if (first == pending_.end()) {
        first = std::find_if(pending_.begin(), pending_.end(), [&](const Operator* op) {
          const Dims* x = input(*op, 0);
          return role_of(op->name) != Role::view && x != nullptr && x->size() >= 2 &&
                 x->back() == d_;
        });
      }
      step_.unmapped.insert(step_.unmapped.end(), pending_.begin(), first);
    }
    for (auto it = first; it != pending_.end(); ++it) {
      if (role_of((*it)->name) == Role::all_reduce && !step_.layers.empty())
        layer_.all_reduces.push_back(*it);
      else
        layer_.groups[attn_norm].push_back(*it);
    }
    pending_.clear();
  }

  // The MLP's operators end at its last projection or experts kernel; those after it belong to
  // the next layer's norm (or the final norm).
  void close_layer() {
    const auto is_mlp_work = [&](const Operator* op) {
      const std::optional<Projection> p = projection(*op);
      return (p && (p->in == d_ || p->out == d_)) || role_of(op->name) == Role::fused_experts;
    };
    const auto last = std::find_if(mlp_ops_.rbegin(), mlp_ops_.rend(), is_mlp_work).base();
    for (auto it = mlp_ops_.begin(); it != last; ++it) {
      const Operator* op = *it;
      const std::optional<Projection> p = projection(*op);
      if (p && p->in == d_) {
        layer_.groups[gate_up].push_back(op);
        layer_.ups.push_back(*p);
      } else if (p && p->out == d_) {
        layer_.groups[down].push_back(op);
        layer_.downs.push_back(*p);
      } else if (role_of(op->name) == Role::fused_experts) {
        // One kernel for all the experts' work, or two (gate/up, then down after the
        // activation, as aten::_grouped_mm runs them).
        layer_.groups[layer_.fused_experts == nullptr ? gate_up : down].push_back(op);
        if (layer_.fused_experts == nullptr)
          layer_.fused_experts = op;
      } else {
        layer_.groups[mlp_act].push_back(op);
        layer_.split = layer_.split || (layer_.downs.empty() && layer_.groups[down].empty() &&
                                        splits_in_two(op->name));
        layer_.routed = layer_.routed || op->name.find("topk") != std::string::npos;
      }
    }
    pending_.assign(last, mlp_ops_.end());
    mlp_ops_.clear();
    check_dense_mlp();
    step_.layers.push_back(std::move(layer_));
    layer_ = Layer{};
  }

  // A dense MLP is gate and up (of one width) or one up, then one down; more projections without
  // a router's top-k are a structure this mapping does not know: skipped, not mis-priced.
  void check_dense_mlp() {
    const Layer& l = layer_;
    if (l.mixture() || step_.skip != Skip::none)
      return;
    const bool dense = (l.ups.size() == 1 || (l.ups.size() == 2 && l.ups[0].out == l.ups[1].out)) &&
                       l.downs.size() == 1;
    if (!dense) {
      // The projection past the dense pattern: a third from d_model, else a second back.
      const Operator* extra = l.ups.size() > 2     ? l.groups[gate_up][2]
                              : l.downs.size() > 1 ? l.groups[down][1]
                                                   : nullptr;
      skip(Skip::odd_mlp, extra,
           fmt::format("an MLP of {} projections from d_model and {} back, neither a dense MLP "
                       "nor a routed mixture (no top-k)",
                       l.ups.size(), l.downs.size()));
    }
  }

  void take_head(const Operator* op, const Projection& p) {
    step_.lm_head = std::move(pending_);
    pending_.clear();
    step_.lm_head.push_back(op);
    step_.lm_rows = p.tokens;
    state_ = State::sampling;
  }

  void finish() {
    switch (state_) {
      case State::seek_layer:
        skip(Skip::no_layer, first_framework_op(), "");
        return;
      case State::qkv:
        skip(Skip::unknown_attention, first_custom_, "");
        return;
      case State::attention:
      case State::mlp_norm:
        skip(Skip::layer_cut_short, nullptr, "");
        return;
      case State::mlp:
        // A base model (no LM head): the final norm after the last layer is no op of the
        // profile (the roofline prices the head that a causal LM adds).
        close_layer();
        if (step_.skip != Skip::none)
          return;
        step_.unmapped.insert(step_.unmapped.end(), pending_.begin(), pending_.end());
        pending_.clear();
        break;
      case State::sampling:
        break;
    }
    if (step_.layers.empty()) {  // an LM head straight after the embedding
      skip(Skip::no_layer, nullptr, "");
      return;
    }
    const std::vector<std::int64_t> first = signature(step_.layers.front());
    for (const Layer& layer : step_.layers) {
      if (signature(layer) != first) {
        skip(Skip::layers_differ, layer.groups[qkv_proj].front(), "");
        return;
      }
    }
  }

  const Operator* first_framework_op() const {
    const auto it = std::find_if(pending_.begin(), pending_.end(),
                                 [](const Operator* o) { return is_framework_op(o->name); });
    return it != pending_.end() ? *it : nullptr;
  }

  void skip(Skip why, const Operator* culprit, std::string problem) {
    step_.skip = why;
    step_.culprit = culprit;
    step_.problem = std::move(problem);
  }

  std::int64_t d_;
  std::int64_t vocab_;
  const StepHints& hints_;
  Step step_;
  State state_ = State::seek_layer;
  Layer layer_;
  std::vector<const Operator*> pending_;
  std::vector<const Operator*> mlp_ops_;
  const Operator* first_custom_ = nullptr;  // the first framework operator after the q/k/v start
};

}  // namespace

Step map_step(std::span<const Operator* const> operators, const Operator* embedding,
              const StepHints& hints) {
  return StepMapper(embedding, hints).map(operators);
}

}  // namespace exitsim::analysis::kineto
