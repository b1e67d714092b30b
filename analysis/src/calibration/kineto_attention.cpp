// A layer's attention from its operator's shapes: PyTorch's 4-D SDPA and batched products, and
// the varlen / paged kernels of vLLM, SGLang, FlashAttention and FlashInfer, whose batch is
// flattened into [tokens, heads, head_dim].
#include "kineto_attention.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace exitsim::analysis::kineto {
namespace {

// Whether `a` reads the queries of the projections before it: whole heads of more than one
// element, as many as the query projection makes (separate q, k, v: the first one's outputs;
// one fused projection: its outputs less 2 x the K/V heads' width).
bool matches_projections(const Attention& a, std::span<const Projection> qkv) {
  std::int64_t width = 0;
  if (a.head_dim < 2 || a.heads < 1 || a.sequences < 1 || qkv.empty() ||
      __builtin_mul_overflow(a.heads, a.head_dim, &width))
    return false;
  if (qkv.front().out == width)
    return true;
  const std::int64_t kv = qkv.front().out - width;
  return qkv.size() == 1 && kv > 0 && kv % (2 * a.head_dim) == 0;
}

// The sequences of a varlen call from its first 1-D input after q, k, v: the kernels take their
// offsets (cu_seqlens, qo_indptr: S + 1 entries) or per-sequence lengths (seq_lens: S) first. As
// many entries as tokens (or one more) mean one query per sequence; 2 to `tokens` entries are
// offsets of one sequence fewer; 0: none.
std::int64_t sequences_from_offsets(const Operator& op, std::int64_t tokens) {
  for (std::size_t i = 3; i < op.input_dims.size(); ++i) {
    const Dims& d = op.input_dims[i];
    if (d.size() != 1)
      continue;
    if (d[0] == tokens || d[0] == tokens + 1)
      return tokens;
    return d[0] >= 2 && d[0] <= tokens ? d[0] - 1 : 0;
  }
  return 0;
}

// A varlen or paged kernel: q [tokens, heads, head_dim], the sequences from its offsets or the
// step's annotation; a prefill's keys are taken to be its queries (a cached prefix is in no
// shape), and said so; a decode's keys are in no shape at all.
AttentionReading varlen(const Operator& op, const Dims& q, std::int64_t tokens,
                        std::span<const Projection> qkv, const StepHints& hints) {
  Attention a{1, q[1], q[2], 0, 0, ""};
  if (!matches_projections(a, qkv))
    return {};
  std::int64_t sequences = sequences_from_offsets(op, tokens);
  std::string source = "its offsets input";
  if (sequences == 0 && hints.requests) {
    const StepRequests& r = *hints.requests;
    if (r.prefill > 0 && r.decode > 0) {
      return {std::nullopt, fmt::format("an attention over {} prefills and {} decodes flattened "
                                        "into one varlen call (their split is in no shape)",
                                        r.prefill, r.decode)};
    }
    sequences = r.prefill > 0 ? r.prefill : r.decode;
    source = "the step's annotation";
  }
  if (sequences <= 0 || sequences > tokens)
    return {std::nullopt, "an attention over flattened sequences whose number no shape gives"};
  a.sequences = sequences;
  a.queries = tokens / sequences;
  if (a.queries <= 1)
    return {std::nullopt, "a decode attention whose keys per sequence no shape gives"};
  a.keys = a.queries;
  a.assumed = fmt::format(
      "{}: {} tokens read as {} sequences (from {}) of {} queries{}, each attending to its own "
      "queries only (a cached prefix is in no shape)",
      op.name, tokens, sequences, source, a.queries,
      tokens % sequences == 0 ? "" : " (their mean: lengths are in no shape)");
  return {a, ""};
}

}  // namespace

AttentionReading attention_core(const Operator& op, std::int64_t tokens,
                                std::span<const Projection> qkv, const StepHints& hints) {
  // baddbmm(input, batch1, batch2): the product's operands come second and third.
  const std::size_t first = op.name == "aten::baddbmm" ? 1 : 0;
  const Dims* q = input(op, first);
  const Dims* k = input(op, first + 1);
  if (q == nullptr || k == nullptr)
    return {};
  std::optional<Attention> found;
  if (role_of(op.name) == Role::attention) {
    if (q->size() == 4 && k->size() == 4 && (*q)[0] == (*k)[0] && (*q)[3] == (*k)[3]) {
      found = Attention{(*q)[0], (*q)[1], (*q)[3], (*q)[2], (*k)[2], ""};  // [B, H, t, hd]
      // FlashAttention's own layout, [B, t, H, hd] (not its kvcache call, whose k is the whole
      // preallocated cache, not the keys read).
      const bool flash = op.name.find("flash_attn") != std::string::npos &&
                         op.name.find("kvcache") == std::string::npos;
      if (flash && !matches_projections(*found, qkv))
        found = Attention{(*q)[0], (*q)[2], (*q)[3], (*q)[1], (*k)[1], ""};
    } else if (q->size() == 3 && (*q)[0] == tokens) {
      return varlen(op, *q, tokens, qkv, hints);
    }
  } else if (is_batched_product(op)) {
    if (q->size() == 4 && k->size() == 4 && (*q)[0] == (*k)[0] && (*q)[1] == (*k)[1] &&
        (*q)[3] == (*k)[2]) {  // q [B, H, tq, hd] x k^T [B, H, hd, tk]
      found = Attention{(*q)[0], (*q)[1], (*q)[3], (*q)[2], (*k)[3], ""};
    } else if (q->size() == 3 && k->size() == 3 && (*q)[0] == (*k)[0] && (*q)[2] == (*k)[1] &&
               (*q)[1] > 0 && tokens % (*q)[1] == 0) {  // [B x H, tq, hd] x [B x H, hd, tk]
      const std::int64_t sequences = tokens / (*q)[1];
      if (sequences > 0 && (*q)[0] % sequences == 0)
        found = Attention{sequences, (*q)[0] / sequences, (*q)[2], (*q)[1], (*k)[2], ""};
    }
  }
  if (found && matches_projections(*found, qkv))
    return {found, ""};
  return {};
}

double attention_pairs(const Attention& a) {
  const auto q = static_cast<double>(a.queries);
  const double c = std::max(0.0, static_cast<double>(a.keys) - q);
  const double per_sequence =
      a.queries == 1 ? static_cast<double>(a.keys) : q * c + q * (q + 1) / 2;
  return static_cast<double>(a.sequences) * per_sequence;
}

}  // namespace exitsim::analysis::kineto
