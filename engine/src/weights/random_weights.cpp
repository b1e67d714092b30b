#include <algorithm>
#include <cmath>

#include "exitsim/core/random.hpp"
#include "exitsim/engine/model_weights.hpp"
#include "weights/tensor_walk.hpp"

namespace exitsim::engine {
namespace {

// A zero-mean, unit-variance draw from four uniforms (Irwin-Hall, rescaled). Gaussian tails do
// not matter for initial weights, and unlike Box-Muller or the polar method this uses only
// additions and one multiplication, which IEEE 754 rounds identically everywhere, whereas libm's
// log and cos may differ in the last bit between platforms.
float unit_draw(RandomStream& stream, double scale) {
  const double sum = stream.uniform() + stream.uniform() + stream.uniform() + stream.uniform();
  // Written as (sum - 2) * scale, which no compiler can contract into a fused multiply-add.
  const double centred = sum - 2.0;
  return static_cast<float>(centred * scale);
}

double init_std(detail::Init init, int executed_layers) {
  switch (init) {
    case detail::Init::linear:
    case detail::Init::lora_a:
    case detail::Init::lora_b:
      return 0.02;
    case detail::Init::residual:
      return 0.02 / std::sqrt(2.0 * executed_layers);
    case detail::Init::router:
      return 0.1;
    case detail::Init::ones:
    case detail::Init::zero:
      return 0.0;
  }
  return 0.0;
}

}  // namespace

ModelWeights random_model_weights(const ModelConfig& config, std::uint64_t seed) {
  ModelWeights w;
  detail::size_containers(config, w);
  // The variance of four U(0, 1) is 4/12, so sqrt(3) restores unit variance; sqrt is correctly
  // rounded by IEEE 754, so the scale is the same everywhere too.
  const double unit_scale = std::sqrt(3.0);
  const int executed_layers = std::max(1, config.shape.depth.full_depth());
  detail::walk_tensors(config, w, [&](const TensorSpec& spec, auto& target, detail::Init init) {
    detail::resize_target(target, spec);
    const auto values = detail::target_values(target);
    if (init == detail::Init::ones || init == detail::Init::zero) {
      std::fill(values.begin(), values.end(), init == detail::Init::ones ? 1.0f : 0.0f);
      return;
    }
    RandomStream stream(seed, spec.name);
    const double scale = unit_scale * init_std(init, executed_layers);
    for (float& value : values)
      value = unit_draw(stream, scale);
  });
  if (config.shape.tied_embeddings)
    w.lm_head = w.embedding;
  return w;
}

}  // namespace exitsim::engine
