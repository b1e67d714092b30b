#include "exitsim/engine/backend.hpp"

namespace exitsim::engine {

profiler::SpanShape layer_call_shape(int layer, int recursion, std::span<const LayerRow> rows,
                                     const KvCache& kv, std::uint64_t step) {
  profiler::SpanShape shape;
  shape.batch_tokens = static_cast<std::int64_t>(rows.size());
  std::int64_t earlier_in_chunk = 0;
  for (std::size_t r = 0; r < rows.size(); ++r) {
    const LayerRow& row = rows[r];
    const bool continues_chunk = r > 0 && row.chunk >= 0 && rows[r - 1].chunk == row.chunk;
    earlier_in_chunk = continues_chunk ? earlier_in_chunk + 1 : 0;
    const std::int64_t cached =
        row.read_stream >= 0 ? kv.rows_up_to(row.read_stream, row.position) : 0;
    shape.context_tokens += cached + earlier_in_chunk + 1;
  }
  shape.depth = layer;
  shape.recursion = recursion;
  shape.step_id = step;
  return shape;
}

LayerSource layer_source(const DepthStructure& d, int executed_layer) {
  if (executed_layer < d.prelude_layers)
    return {executed_layer, 0};
  const int in_stack = executed_layer - d.prelude_layers;
  if (in_stack < d.block_layers * d.recursions) {
    return {d.prelude_layers + in_stack % d.block_layers, in_stack / d.block_layers + 1};
  }
  return {executed_layer - d.block_layers * (d.recursions - 1), 0};
}

}  // namespace exitsim::engine
