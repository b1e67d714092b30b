#include "exitsim/engine/options_from_setup.hpp"

namespace exitsim::engine {

EngineOptions options_from_setup(const setup::ExecutorSetup& setup) {
  EngineOptions o;
  o.scheduler = setup.scheduler;
  o.scheduler_params = setup.scheduler_params;
  o.limits = setup.limits;
  o.block_size = setup.block_size;
  o.kv_blocks = setup.kv_blocks;
  o.exit_policy = setup.exit_policy;
  o.strategy = setup.strategy;
  o.depthwise = setup.depthwise;
  o.host_kv_blocks = setup.host_swap ? setup.host_swap->host_blocks : 0;
  o.seed = setup.seed;
  return o;
}

}  // namespace exitsim::engine
