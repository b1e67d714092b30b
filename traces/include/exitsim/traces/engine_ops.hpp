#pragma once

#include <array>
#include <string_view>

// The op names the engine writes in its op traces: the engine records them, calibration fits one
// latency model per name and the calibrated cost model prices an iteration as the engine runs it.
// One list, so the three cannot drift apart.
namespace exitsim::traces::engine_ops {

// One call each per executed layer and pass (prefill pass, decode pass), in this order.
inline constexpr std::string_view attn_norm = "attn_norm";
inline constexpr std::string_view qkv_proj = "qkv_proj";
inline constexpr std::string_view rotary = "rotary";
inline constexpr std::string_view kv_write = "kv_write";
inline constexpr std::string_view attention = "attention";
inline constexpr std::string_view o_proj = "o_proj";
inline constexpr std::string_view mlp_norm = "mlp_norm";
inline constexpr std::string_view mlp_gate_up = "mlp.gate_up";
inline constexpr std::string_view mlp_act = "mlp.act";
inline constexpr std::string_view mlp_down = "mlp.down";
inline constexpr std::array<std::string_view, 10> layer = {
    attn_norm, qkv_proj, rotary,      kv_write, attention,
    o_proj,    mlp_norm, mlp_gate_up, mlp_act,  mlp_down};

// A layer op's fit for prefill-pass calls (prompt chunks: matrix-matrix projections), where an
// op grid timed them apart from decode calls: "qkv_proj.prefill". Op traces do not carry it (their
// calls of both passes share the op's name).
inline constexpr std::string_view prefill_suffix = ".prefill";

// state_copy: K/V of copied exit states at the layers above a token's exit.
inline constexpr std::string_view kv_only = "state_copy.kv_proj";
// Once per pass.
inline constexpr std::string_view embed = "embed";
inline constexpr std::string_view lm_head = "lm_head";
inline constexpr std::string_view sampling = "sampling";
// Policy work the simulator's batch entries do not describe; calibration folds it into the step
// residual.
inline constexpr std::string_view probe = "lm_head.probe";
inline constexpr std::string_view router = "router";
inline constexpr std::string_view compaction = "compaction";
// The GPU backend waiting for the device to hand back what the host needs (hidden rows, K/V,
// logits): the host-device synchronization the simulator must model. Calibration folds it into
// the step residual.
inline constexpr std::string_view host_sync = "host_sync";
// Swap preemption's copies between the K/V pool and its host tier. The simulator prices them
// from the host link (hardware.host_link_bandwidth_gbps); calibration folds them into the step
// residual.
inline constexpr std::string_view kv_swap = "kv.swap";
// The engine waiting, with nothing to run, for the next request to arrive (only when it honours
// the workload's arrival times). Idle time is not step time: calibration leaves it out of the
// step residual, as the simulator's clock idles between arrivals on its own.
inline constexpr std::string_view wait_for_arrival = "engine.wait_for_arrival";
// Collectives of a tensor- or pipeline-parallel replica, measured by others (an imported profile:
// `calibrate --vidur-all-reduce`, `--vidur-send-recv`); exitsim's engine does not trace them. The
// all-reduce of a layer's partial sums (batch: the tokens whose activations, tokens x d_model,
// are reduced; two per layer), and the hand-off of the activations between pipeline stages
// within a node and between nodes (batch: the tokens handed off).
inline constexpr std::string_view tp_all_reduce = "tp_all_reduce";
inline constexpr std::string_view pp_send_recv = "pp_send_recv";
inline constexpr std::string_view pp_send_recv_remote = "pp_send_recv.remote";
// Not an engine op: a whole decode step that ran as CUDA-graph replays (calibrate --kineto of a
// framework that captures its decode steps: vLLM, SGLang), fitted against the step's decode
// sequences; the calibrated cost model prices decode-only iterations from it where it is.
inline constexpr std::string_view graph_step = "step.graph";
// Not an engine span: a step's wall time (first op to the next step's first op) less the ops the
// calibrated model prices one by one — scheduling, policy work, gaps between ops. Calibration
// fits it like an op, against the tokens embedded (B) and emitted (C) in the step.
inline constexpr std::string_view step_residual = "step.residual";

}  // namespace exitsim::traces::engine_ops
