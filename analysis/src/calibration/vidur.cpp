// Vidur's profiling CSVs (mlp.csv, attention.csv, all_reduce.csv, send_recv.csv), read by
// header name.
#include "exitsim/analysis/vidur.hpp"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <fstream>
#include <optional>
#include <string_view>
#include <utility>

#include "exitsim/core/csv_fields.hpp"
#include "exitsim/core/csv_lines.hpp"
#include "exitsim/core/error.hpp"

namespace exitsim::analysis::vidur {
namespace {

constexpr double k_us_per_ms = 1000.0;
constexpr std::string_view k_time_prefix = "time_stats.";
constexpr std::string_view k_median_suffix = ".median";

// One Vidur CSV: its header's names, then its rows one at a time; every failure names the file,
// the line, the column and its header name.
class Table {
 public:
  Table(const std::string& path, std::string what)
      : in_(path, std::ios::binary), reader_(in_, path), what_(std::move(what)) {
    if (!in_) {
      throw InputError({path, 0, 0, ""},
                       expected_found("a readable " + what_, "a path that cannot be opened"));
    }
    if (!reader_.next_line())
      reader_.fail_at_end("header",
                          expected_found("a header line (" + what_ + ")", "an empty file"));
    std::vector<CsvField> header;
    split_csv_fields(reader_.line(), header);
    for (const CsvField& cell : header) {
      const std::string name(cell.text);
      // pandas' index column has no name; any other name is given once.
      if (!name.empty() && find(name)) {
        reader_.fail(cell.column, "header",
                     expected_found("each column name once", "\"" + name + "\" twice"));
      }
      names_.push_back(name);
    }
  }

  const std::vector<std::string>& names() const { return names_; }

  std::optional<std::size_t> find(std::string_view name) const {
    for (std::size_t i = 0; i < names_.size(); ++i) {
      if (names_[i] == name)
        return i;
    }
    return std::nullopt;
  }
  // A column the file must have (checked on the header line).
  std::size_t column(std::string_view name) const {
    if (const auto at = find(name))
      return *at;
    throw InputError(
        {reader_.name(), 1, 0, std::string(name)},
        expected_found(fmt::format("a column \"{}\" ({})", name, what_),
                       fmt::format("none among the header's {} columns", names_.size())));
  }

  // The next row that is not blank, split into as many fields as the header has.
  bool next_row() {
    while (reader_.next_line()) {
      if (reader_.line().find_first_not_of(" \t") == std::string::npos)
        continue;
      cells_ = &reader_.split_row(names_.size());
      return true;
    }
    return false;
  }
  // Throws unless a row was read.
  void require_rows(bool any) const {
    if (!any)
      reader_.fail_at_end("row", expected_found("at least one row (" + what_ + ")", "none"));
  }

  std::int64_t line() const { return reader_.line_number(); }
  std::string_view text(std::size_t index) const { return (*cells_)[index].text; }
  bool empty(std::size_t index) const { return (*cells_)[index].text.empty(); }

  [[noreturn]] void fail(std::size_t index, const std::string& expected) const {
    reader_.fail((*cells_)[index].column, names_[index],
                 expected_found(expected, quote_field((*cells_)[index].text)));
  }

  // A time in Vidur's milliseconds, in microseconds.
  double time_us(std::size_t index) const {
    const std::string_view t = text(index);
    double value = 0;
    const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), value);
    if (t.empty() || ec != std::errc{} || end != t.data() + t.size() || !std::isfinite(value) ||
        value < 0)
      fail(index, "a time in milliseconds >= 0");
    return value * k_us_per_ms;
  }
  // A whole number >= `least` (pandas writes a count that shared a column with blanks as "4.0").
  std::int64_t whole(std::size_t index, std::int64_t least) const {
    const std::string_view t = text(index);
    const char* last = t.data() + t.size();
    std::int64_t value = 0;
    auto [end, ec] = std::from_chars(t.data(), last, value);
    if (!t.empty() && (ec != std::errc{} || end != last)) {
      double real = 0;
      const auto parsed = std::from_chars(t.data(), last, real);
      if (parsed.ec == std::errc{} && parsed.ptr == last && std::isfinite(real) &&
          real == std::floor(real) && std::abs(real) < 9e15) {
        value = static_cast<std::int64_t>(real);
        ec = std::errc{};
        end = last;
      }
    }
    if (t.empty() || ec != std::errc{} || end != last || value < least)
      fail(index, fmt::format("a whole number >= {}", least));
    return value;
  }
  int count(std::size_t index, std::int64_t least) const {
    const std::int64_t value = whole(index, least);
    if (value > 1'000'000'000)
      fail(index, fmt::format("a whole number from {} to 1000000000", least));
    return static_cast<int>(value);
  }
  // pandas writes Python's True and False.
  bool boolean(std::size_t index) const {
    const std::string_view t = text(index);
    if (t == "True" || t == "true")
      return true;
    if (t == "False" || t == "false")
      return false;
    fail(index, "True or False");
  }

 private:
  std::ifstream in_;
  CsvLineReader reader_;
  std::string what_;
  std::vector<std::string> names_;
  const std::vector<CsvField>* cells_ = nullptr;  // the row read last
};

// The median, min and max columns of one timed op.
struct TimeColumns {
  std::string op;
  std::size_t median = 0, min = 0, max = 0;
};

TimeColumns time_columns(const Table& table, const std::string& op) {
  const std::string base = std::string(k_time_prefix) + op;
  return {op, table.column(base + std::string(k_median_suffix)), table.column(base + ".min"),
          table.column(base + ".max")};
}

// Every op with a time_stats.<op>.median column, in header order.
std::vector<TimeColumns> all_time_columns(const Table& table) {
  std::vector<TimeColumns> out;
  for (const std::string& name : table.names()) {
    if (name.starts_with(k_time_prefix) && name.ends_with(k_median_suffix) &&
        name.size() > k_time_prefix.size() + k_median_suffix.size()) {
      out.push_back(time_columns(
          table, name.substr(k_time_prefix.size(),
                             name.size() - k_time_prefix.size() - k_median_suffix.size())));
    }
  }
  return out;
}

}  // namespace

MlpProfile read_mlp(const std::string& path) {
  Table table(path, "Vidur's mlp.csv");
  const std::vector<TimeColumns> ops = all_time_columns(table);
  if (ops.empty()) {
    throw InputError({path, 1, 0, "header"},
                     expected_found("time_stats.<op>.median columns (Vidur's mlp.csv)", "none"));
  }
  const std::size_t n_head = table.column("n_head");
  const std::size_t n_kv_head = table.column("n_kv_head");
  const std::size_t n_embd = table.column("n_embd");
  const std::size_t n_expanded_embd = table.column("n_expanded_embd");
  const std::size_t vocab_size = table.column("vocab_size");
  const std::size_t gated = table.column("use_gated_mlp");
  const std::size_t tokens = table.column("num_tokens");
  const std::size_t tensor_parallel = table.column("num_tensor_parallel_workers");

  MlpProfile out;
  std::int64_t first_line = 0;
  while (table.next_row()) {
    const ModelColumns model{table.count(n_head, 1),     table.count(n_kv_head, 1),
                             table.count(n_embd, 1),     table.count(n_expanded_embd, 1),
                             table.count(vocab_size, 1), table.boolean(gated)};
    if (first_line == 0) {
      out.model = model;
      first_line = table.line();
    } else {
      // One model per file: a mixed file would average two models' times.
      const auto same = [&](std::size_t index, int value, int first) {
        if (value != first)
          table.fail(index,
                     fmt::format("{} as on line {} (one model per file)", first, first_line));
      };
      same(n_head, model.n_head, out.model.n_head);
      same(n_kv_head, model.n_kv_head, out.model.n_kv_head);
      same(n_embd, model.n_embd, out.model.n_embd);
      same(n_expanded_embd, model.n_expanded_embd, out.model.n_expanded_embd);
      same(vocab_size, model.vocab_size, out.model.vocab_size);
      if (model.gated != out.model.gated) {
        table.fail(gated, fmt::format("{} as on line {} (one model per file)",
                                      out.model.gated ? "True" : "False", first_line));
      }
    }
    const std::int64_t t = table.whole(tokens, 1);
    const int tp = table.count(tensor_parallel, 1);
    for (const TimeColumns& op : ops) {
      out.times.push_back(
          {op.op, tp, t, table.time_us(op.median), table.time_us(op.min), table.time_us(op.max)});
    }
  }
  table.require_rows(first_line != 0);
  return out;
}

std::vector<AttentionTime> read_attention(const std::string& path) {
  Table table(path, "Vidur's attention.csv");
  const TimeColumns decode = time_columns(table, "attn_decode");
  const TimeColumns prefill = time_columns(table, "attn_prefill");
  const std::size_t input_reshape = table.column("time_stats.attn_input_reshape.median");
  const std::size_t output_reshape = table.column("time_stats.attn_output_reshape.median");
  const std::optional<std::size_t> kv_save = table.find("time_stats.attn_kv_cache_save.median");
  const std::size_t n_embd = table.column("n_embd");
  const std::size_t n_q_head = table.column("n_q_head");
  const std::size_t n_kv_head = table.column("n_kv_head");
  const std::size_t tensor_parallel = table.column("num_tensor_parallel_workers");
  const std::size_t batch_size = table.column("batch_size");
  const std::size_t prefill_chunk = table.column("prefill_chunk_size");
  const std::size_t kv_cache = table.column("kv_cache_size");
  const std::size_t is_prefill = table.column("is_prefill");

  std::vector<AttentionTime> out;
  while (table.next_row()) {
    AttentionTime row;
    row.prefill = table.boolean(is_prefill);
    row.tensor_parallel = table.count(tensor_parallel, 1);
    row.n_q_head = table.count(n_q_head, 1);
    row.n_kv_head = table.count(n_kv_head, 1);
    row.n_embd = table.count(n_embd, 1);
    row.batch_size = table.whole(batch_size, 1);
    // A decode row has no chunk; a prefill row's chunk is its tokens.
    row.prefill_chunk = table.whole(prefill_chunk, row.prefill ? 1 : 0);
    row.kv_cache = table.whole(kv_cache, 0);
    // The other phase's time columns are blank in a row.
    const TimeColumns& timed = row.prefill ? prefill : decode;
    row.median_us = table.time_us(timed.median);
    row.min_us = table.time_us(timed.min);
    row.max_us = table.time_us(timed.max);
    row.reshape_us = table.time_us(input_reshape) + table.time_us(output_reshape);
    if (kv_save && !table.empty(*kv_save))
      row.kv_save_us = table.time_us(*kv_save);
    out.push_back(row);
  }
  table.require_rows(!out.empty());
  return out;
}

std::vector<NetworkTime> read_network(const std::string& path) {
  Table table(path, "Vidur's all_reduce.csv or send_recv.csv");
  const std::vector<TimeColumns> timed = all_time_columns(table);
  const std::size_t collective = table.column("collective");
  const std::size_t workers = table.column("num_workers");
  const std::size_t devices_per_node = table.column("devices_per_node");
  const std::size_t size = table.column("size");
  std::string names;
  for (const TimeColumns& t : timed)
    names += (names.empty() ? "" : ", ") + t.op;

  std::vector<NetworkTime> out;
  while (table.next_row()) {
    const std::string_view name = table.text(collective);
    const TimeColumns* columns = nullptr;
    for (const TimeColumns& t : timed) {
      if (t.op == name)
        columns = &t;
    }
    if (columns == nullptr) {
      table.fail(collective, names.empty()
                                 ? std::string("a collective with time_stats.<collective>.median "
                                               "columns (the header has none)")
                                 : "a collective the header times (" + names + ")");
    }
    NetworkTime row;
    row.collective = std::string(name);
    row.workers = table.count(workers, 1);
    row.devices_per_node = table.count(devices_per_node, 1);
    row.size_bytes = table.whole(size, 1);
    row.median_us = table.time_us(columns->median);
    row.min_us = table.time_us(columns->min);
    row.max_us = table.time_us(columns->max);
    out.push_back(row);
  }
  table.require_rows(!out.empty());
  return out;
}

}  // namespace exitsim::analysis::vidur
