#include "trace_io.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <stdexcept>
#include <utility>

#include "fields.hpp"

namespace exitsim::traces::detail {
namespace {

InputError io_error(const std::string& path, const std::string& message) {
  return InputError(SourceLocation{.file = path, .line = 0, .column = 0, .field = ""}, message);
}

}  // namespace

void append_csv_field(std::string& line, std::string_view text) {
  const bool needs_quotes = text.find_first_of(",\"\r\n") != std::string_view::npos ||
                            (!text.empty() && (text.front() == ' ' || text.back() == ' ' ||
                                               text.front() == '\t' || text.back() == '\t'));
  if (!needs_quotes) {
    line += text;
    return;
  }
  line += '"';
  for (char c : text) {
    if (c == '"')
      line += '"';
    line += c;
  }
  line += '"';
}

std::unique_ptr<std::istream> open_input(const std::string& path) {
  auto in = std::make_unique<std::ifstream>(path, std::ios::binary);
  if (!*in)
    throw io_error(path, fmt::format("cannot open: {}", std::strerror(errno)));
  return in;
}

std::string shown(std::string_view text) {
  std::string out = "\"";
  std::size_t shown = 0;
  for (char c : text) {
    if (shown == k_max_quoted_bytes) {
      out += "...";
      break;
    }
    ++shown;
    switch (c) {
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '"':
        out += "\\\"";
        break;
      default:
        out += c;
    }
  }
  out += '"';
  return out;
}

CsvRecordReader::CsvRecordReader(std::unique_ptr<std::istream> in, std::string file)
    : in_(std::move(in)), file_(std::move(file)) {}

InputError CsvRecordReader::error(std::int64_t column, std::string field,
                                  const std::string& message) const {
  return InputError(
      SourceLocation{
          .file = file_, .line = record_line_, .column = column, .field = std::move(field)},
      message);
}

bool CsvRecordReader::read_physical_line(std::string& line) {
  if (!std::getline(*in_, line))
    return false;
  ++physical_line_;
  if (!line.empty() && line.back() == '\r')
    line.pop_back();
  return true;
}

void CsvRecordReader::expect_preamble(std::string_view version_line,
                                      std::span<const std::string_view> columns,
                                      std::size_t required) {
  std::string first;
  record_line_ = 1;
  if (!read_physical_line(first)) {
    throw error(0, "version", expected_found(shown(version_line), "an empty file"));
  }
  first = std::string(without_utf8_bom(first));
  if (first != version_line) {
    std::string message = expected_found(shown(version_line), shown(first));
    // Same format, other version: say so, rather than leave the user comparing two lines.
    const std::string_view family = version_line.substr(0, version_line.rfind(' ') + 1);
    if (first.starts_with(family)) {
      message += fmt::format(" (this build reads only {})", version_line.substr(family.size()));
    }
    throw error(0, "version", message);
  }

  std::vector<CsvField> header;
  if (!next(header)) {
    record_line_ = physical_line_ + 1;
    throw error(0, "header", "expected the header row, found end of file");
  }
  std::string expected_names;
  for (std::string_view c : columns) {
    if (!expected_names.empty())
      expected_names += ',';
    expected_names += c;
  }
  for (std::size_t i = 0; i < columns.size() && i < header.size(); ++i) {
    if (header[i].text != columns[i]) {
      throw error(
          header[i].column, "header",
          expected_found(fmt::format("column {}", shown(columns[i])), shown(header[i].text)));
    }
  }
  if (header.size() < required || header.size() > columns.size()) {
    const std::string count = required == columns.size()
                                  ? fmt::format("{}", columns.size())
                                  : fmt::format("{} to {}", required, columns.size());
    throw error(0, "header",
                expected_found(fmt::format("{} columns ({})", count, expected_names),
                               fmt::format("{}", header.size())));
  }
  header_columns_ = header.size();
}

bool CsvRecordReader::next(std::vector<CsvField>& fields) {
  fields.clear();
  if (!read_physical_line(line_))
    return false;
  record_line_ = physical_line_;
  std::size_t pos = 0;
  while (true) {
    CsvField field;
    field.column = static_cast<std::int64_t>(pos) + 1;
    if (pos < line_.size() && line_[pos] == '"') {
      ++pos;
      while (true) {
        const std::size_t quote = line_.find('"', pos);
        if (quote == std::string::npos) {
          // A quoted field may hold line breaks: continue on the next physical line.
          field.text.append(line_, pos, std::string::npos);
          field.text += '\n';
          if (!read_physical_line(line_)) {
            throw error(
                field.column, "",
                expected_found("a closing quote for this quoted field", "the end of the file"));
          }
          pos = 0;
          continue;
        }
        field.text.append(line_, pos, quote - pos);
        if (quote + 1 < line_.size() && line_[quote + 1] == '"') {
          field.text += '"';
          pos = quote + 2;
          continue;
        }
        pos = quote + 1;
        break;
      }
      if (pos < line_.size() && line_[pos] != ',') {
        throw error(static_cast<std::int64_t>(pos) + 1, "",
                    expected_found("',' after a closing quote", shown(line_.substr(pos, 1))));
      }
    } else {
      const std::size_t comma = std::min(line_.find(',', pos), line_.size());
      field.text.assign(line_, pos, comma - pos);
      if (field.text.find('"') != std::string::npos) {
        throw error(field.column, "",
                    expected_found("a quote only inside a quoted field (quote the whole field "
                                   "and double the quote)",
                                   "one in an unquoted field"));
      }
      pos = comma;
    }
    fields.push_back(std::move(field));
    if (pos >= line_.size())
      return true;
    ++pos;  // the comma; a trailing comma leaves one more, empty, field
    if (pos == line_.size()) {
      fields.push_back(CsvField{.text = "", .column = static_cast<std::int64_t>(pos) + 1});
      return true;
    }
  }
}

RowParser::RowParser(const CsvRecordReader& reader, std::span<const std::string_view> columns,
                     const std::vector<CsvField>& fields)
    : reader_(reader), columns_(columns), fields_(fields) {
  if (fields.size() == columns.size())
    return;
  const std::string found = fields.size() == 1 && fields[0].text.empty()
                                ? std::string("an empty line")
                                : fmt::format("{}", fields.size());
  throw reader.error(0, "", expected_found(fmt::format("{} fields", columns.size()), found));
}

InputError RowParser::error(std::size_t index, const std::string& message) const {
  return reader_.error(fields_[index].column, std::string(columns_[index]), message);
}

std::int64_t RowParser::int64(std::size_t index, std::int64_t min_value) const {
  const std::string& text = fields_[index].text;
  const std::string expected = min_value == 0 ? "a non-negative integer"
                               : min_value == std::numeric_limits<std::int64_t>::min()
                                   ? "an integer"
                                   : fmt::format("an integer >= {}", min_value);
  if (text.empty())
    throw error(index, expected_found(expected, "an empty field"));
  const IntegerParse<std::int64_t> parsed = parse_integer<std::int64_t>(text);
  if (parsed.overflow) {
    throw error(index, expected_found(expected + " that fits in 64 bits", shown(text)));
  }
  if (!parsed.value || *parsed.value < min_value)
    throw error(index, expected_found(expected, shown(text)));
  return *parsed.value;
}

std::int64_t RowParser::int64_within(std::size_t index, std::int64_t min_value,
                                     std::int64_t max_value) const {
  const std::string& text = fields_[index].text;
  const std::string expected = fmt::format("an integer from {} to {}", min_value, max_value);
  if (text.empty())
    throw error(index, expected_found(expected, "an empty field"));
  const IntegerParse<std::int64_t> parsed = parse_integer<std::int64_t>(text);
  if (parsed.overflow || !parsed.value || *parsed.value < min_value || *parsed.value > max_value)
    throw error(index, expected_found(expected, shown(text)));
  return *parsed.value;
}

std::uint64_t RowParser::uint64(std::size_t index) const {
  const std::string& text = fields_[index].text;
  const std::string expected = "a non-negative integer";
  if (text.empty())
    throw error(index, expected_found(expected, "an empty field"));
  const IntegerParse<std::uint64_t> parsed = parse_integer<std::uint64_t>(text);
  if (parsed.overflow) {
    throw error(index, expected_found(expected + " that fits in 64 bits", shown(text)));
  }
  if (!parsed.value)
    throw error(index, expected_found(expected, shown(text)));
  return *parsed.value;
}

int RowParser::int32(std::size_t index, int min_value) const {
  const std::int64_t value = int64(index, min_value);
  if (value > std::numeric_limits<int>::max()) {
    throw error(index,
                expected_found(fmt::format("an integer <= {}", std::numeric_limits<int>::max()),
                               shown(fields_[index].text)));
  }
  return static_cast<int>(value);
}

double RowParser::optional_double(std::size_t index) const {
  const std::string& text = fields_[index].text;
  if (text.empty())
    return std::numeric_limits<double>::quiet_NaN();
  double value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc{} || ptr != end || !std::isfinite(value)) {
    throw error(index, expected_found("a finite number or an empty field", shown(text)));
  }
  return value;
}

std::vector<double> RowParser::number_list(std::size_t index, double low, double high,
                                           std::string_view what) const {
  const std::string& text = fields_[index].text;
  std::vector<double> values;
  if (text.empty())
    return values;
  std::size_t begin = 0;
  for (;;) {
    const std::size_t end = std::min(text.find(';', begin), text.size());
    double value = 0;
    const auto [ptr, ec] = std::from_chars(text.data() + begin, text.data() + end, value);
    if (ec != std::errc{} || ptr != text.data() + end || !(value >= low && value <= high)) {
      throw error(index, expected_found(fmt::format("';'-separated items, each {}", what),
                                        shown(text.substr(begin, end - begin))));
    }
    values.push_back(value);
    if (end == text.size())
      return values;
    begin = end + 1;
  }
}

const std::string& RowParser::text(std::size_t index, bool allow_empty) const {
  const std::string& value = fields_[index].text;
  if (!allow_empty && value.empty()) {
    throw error(index, expected_found("a non-empty string", "an empty field"));
  }
  return value;
}

}  // namespace exitsim::traces::detail
