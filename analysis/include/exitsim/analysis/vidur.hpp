#pragma once

// Readers of Vidur's public profiling CSVs (github.com/microsoft/vidur, MIT licence:
// data/profiling/compute/<gpu>/<model>/{mlp,attention}.csv and
// data/profiling/network/<node>/{all_reduce,send_recv}.csv). Columns are found by their header
// name (files differ in column order, some start with pandas' unnamed index column, newer ones
// add columns); times are converted from Vidur's milliseconds to microseconds. Every malformed
// input is one InputError naming the file, the line, the column and its header name, with
// "expected X, found Y". Rows are kept as the file gives them, duplicated grid points included
// (mlp.csv times 4096 tokens twice): consumers average them.

#include <cstdint>
#include <string>
#include <vector>

namespace exitsim::analysis::vidur {

// The model an mlp.csv profiled: its whole shape (not one GPU's shard), as Vidur's model config
// gives it.
struct ModelColumns {
  int n_head = 0, n_kv_head = 0, n_embd = 0, n_expanded_embd = 0, vocab_size = 0;
  bool gated = false;  // use_gated_mlp
};

// One op of one mlp.csv row: Vidur's op name ("attn_pre_proj", "attn_post_proj", "mlp_up_proj",
// "mlp_act", "mlp_down_proj", "input_layernorm", "post_attention_layernorm", "add", "attn_rope",
// "emb", and any other `time_stats.<op>.median` column), at `tokens` tokens (num_tokens) on one
// GPU of a `tensor_parallel`-way group (num_tensor_parallel_workers); times in microseconds.
struct ComputeTime {
  std::string op;
  int tensor_parallel = 1;
  std::int64_t tokens = 0;
  double median_us = 0, min_us = 0, max_us = 0;
};

struct MlpProfile {
  ModelColumns model;
  std::vector<ComputeTime> times;  // by row, then by op in header order
};

// One model per file: a row of another shape is refused.
MlpProfile read_mlp(const std::string& path);

// One attention.csv row: a decode call (`batch_size` sequences, each after `kv_cache` cached
// tokens) or a prefill call (one sequence of `prefill_chunk` tokens after `kv_cache` cached ones),
// timed on one GPU of a `tensor_parallel`-way group; the heads are the whole model's.
struct AttentionTime {
  bool prefill = false;  // is_prefill
  int tensor_parallel = 1;
  int n_q_head = 0, n_kv_head = 0, n_embd = 0;
  std::int64_t batch_size = 0, prefill_chunk = 0, kv_cache = 0;
  double median_us = 0, min_us = 0, max_us = 0;  // attn_decode or attn_prefill
  double reshape_us = 0;                         // attn_input_reshape + attn_output_reshape medians
  double kv_save_us = 0;  // attn_kv_cache_save median when the file has it, else 0
};

std::vector<AttentionTime> read_attention(const std::string& path);

// One collective of all_reduce.csv or send_recv.csv: `size_bytes` bytes among `workers` GPUs,
// `devices_per_node` of them to a node (1: every GPU on its own node).
struct NetworkTime {
  std::string collective;  // "all_reduce", "send_recv"
  int workers = 0, devices_per_node = 0;
  std::int64_t size_bytes = 0;
  double median_us = 0, min_us = 0, max_us = 0;
};

std::vector<NetworkTime> read_network(const std::string& path);

// The mean of a grid point's times, for the points Vidur timed more than once (mlp.csv has 4096
// tokens twice): what every consumer of the readers prices against.
struct Mean {
  double sum = 0;
  int count = 0;
  void add(double x) {
    sum += x;
    ++count;
  }
  double value() const { return sum / count; }
};

}  // namespace exitsim::analysis::vidur
