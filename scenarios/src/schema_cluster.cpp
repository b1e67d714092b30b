// Schema rows: the cluster, whose replicas are identical (cluster.replicas) or come in groups
// that each override parts of the scenario (cluster.groups, resolved in groups.cpp).
#include "schema_build.hpp"

namespace exitsim::scenario::detail {
namespace {

const std::string k_groups = "cluster.groups";

Resolved cell_value(const std::string& key, Value v) {
  Resolved r = loaded(std::move(v));
  r.key = key;
  return r;
}

// A scenario written with groups leaves cluster.replicas (their sum) out: giving both is an error.
Binding replicas_binding() {
  return Binding{
      [](Scenario& s, const Resolved& r) { assign(s.cluster.replicas, r.value); },
      [](const Scenario& s) {
        Resolved r = loaded(s.cluster.replicas);
        r.given = !renders_groups(s);
        return r;
      },
  };
}

// Groups are built from the document tree (each is the scenario re-resolved with its overrides),
// so storing happens in resolve_replica_groups; this reads them back for rendering.
Binding groups_binding() {
  return Binding{
      {},
      [](const Scenario& s) {
        Resolved r = loaded({});
        if (!renders_groups(s))
          return r;
        for (const ReplicaGroup& group : s.replica_groups) {
          r.records.push_back({cell_value(k_groups + ".count", group.count),
                               cell_value(k_groups + ".set", group.overrides)});
        }
        return r;
      },
  };
}

}  // namespace

bool renders_groups(const Scenario& s) {
  return s.replica_groups.size() > 1 ||
         (s.replica_groups.size() == 1 && !s.replica_groups.front().overrides.empty());
}

std::vector<KeyDef> cluster_keys() {
  return {
      Key("parallel", Type::section,
          "How many GPUs one replica spans (docs/cost_model.md, \"Tensor parallelism\")."),
      Key("parallel.tensor", Type::integer,
          "Tensor-parallel degree: each layer split Megatron-style across this many GPUs of one "
          "node (heads, MLP width and vocabulary sharded; two all-reduces per layer over the "
          "node's link). Must divide the heads and the MLP width, and divide or be a multiple of "
          "the K/V heads (then replicated).")
          .range(1, 64)
          .def(std::int64_t{1})
          .bind(field(&Scenario::parallel, &ParallelSpec::tensor)),
      Key("parallel.pipeline", Type::integer,
          "Pipeline-parallel degree: the executed layers split into this many consecutive "
          "stages, each on its own parallel.tensor GPUs (vLLM's split: the remainder one layer "
          "each to the stages before the last). Stages run micro-batches as vLLM's virtual "
          "engines do; a replica larger than a node hands off between nodes over "
          "hardware.node_link_bandwidth_gbps.")
          .range(1, k_max_pipeline_stages)
          .def(std::int64_t{1})
          .bind(field(&Scenario::parallel, &ParallelSpec::pipeline)),
      Key("parallel.expert", Type::integer,
          "Expert-parallel degree of a mixture of experts: 1 splits every expert across the "
          "parallel.tensor GPUs; parallel.tensor places the experts whole, experts / TP per GPU "
          "(vLLM's --enable-expert-parallel without data parallelism), and the step waits for "
          "the GPU its tokens' routing loads most.")
          .range(1, 64)
          .def(std::int64_t{1})
          .bind(field(&Scenario::parallel, &ParallelSpec::expert)),
      Key("cluster", Type::section, "Replicas behind a global router."),
      Key("cluster.replicas", Type::integer,
          "Number of identical model replicas (each on parallel.tensor x parallel.pipeline GPUs); "
          "not given with "
          "groups.")
          .range(1, static_cast<double>(k_max_replicas))
          .def(std::int64_t{1})
          .bind(replicas_binding()),
      Key("cluster.router", Type::enumeration,
          "round_robin; least_outstanding: fewest unfinished requests; shortest_queue_tokens: "
          "fewest queued tokens; prefix_affinity: the replica holding most of the request's "
          "prompt in its prefix cache, among those not much busier than the least busy "
          "(docs/simulator.md, \"Prefix caching\"; needs scheduler.prefix_caching).")
          .allowed({"round_robin", "least_outstanding", "shortest_queue_tokens", "prefix_affinity"})
          .def(std::string("round_robin"))
          .bind(field(&Scenario::cluster, &ClusterConfig::router)),
      Key(k_groups, Type::records,
          "Replicas that differ, instead of `replicas`: each group is `count` replicas of this "
          "scenario with `set` applied. The replica count is the sum of the counts; replica "
          "indices follow the groups in order.")
          .def(std::vector<std::string>{})
          .bind(groups_binding()),
      Key(k_groups + ".count", Type::integer, "Replicas in the group.")
          .range(1, static_cast<double>(k_max_replicas))
          .def(std::int64_t{1}),
      Key(k_groups + ".set", Type::string_list,
          "Overrides in --set form (\"key.path=value\", the value YAML) of keys under model, "
          "hardware, cost_model, scheduler and parallel; [] = the scenario as written.")
          .def(std::vector<std::string>{}),
  };
}

}  // namespace exitsim::scenario::detail
