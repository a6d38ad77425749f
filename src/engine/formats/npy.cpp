#include "formats/npy.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <string_view>

#include "base/errors.hpp"

namespace jask {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;

// A header's text as Python's repr would show it (non-printable bytes
// escaped), cut to `limit` characters: error messages stay valid UTF-8.
std::string printable(std::string_view text, size_t limit = 200) {
  std::string out;
  size_t i = 0;
  for (; i < text.size() && out.size() < limit; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == '\\') {
      out += "\\\\";
    } else if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      char buf[5];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    }
  }
  if (i < text.size()) out += "...";
  return out;
}

// Minimal reader for the Python literal subset numpy writes in headers:
// {'key': 'str' | True | False | (int, ...), ...}. It accepts no text that
// Python's ast.literal_eval (what numpy.load uses) would read differently
// or refuse; it refuses some that Python reads (comments, escapes, hex).
class LiteralReader {
 public:
  // `python2_longs`: versions 1.0 and 2.0 may hold ints written "3L".
  LiteralReader(const std::string& text, const std::string& path, bool python2_longs)
      : s_(text), path_(path), python2_longs_(python2_longs) {}

  void expect(char c) {
    skip_space();
    if (pos_ >= s_.size() || s_[pos_] != c) fail(std::string("expected '") + c + "'");
    ++pos_;
  }
  bool try_consume(char c) {
    skip_space();
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  std::string read_string() {
    skip_space();
    if (pos_ >= s_.size() || (s_[pos_] != '\'' && s_[pos_] != '"')) fail("expected a string");
    char quote = s_[pos_++];
    size_t end = s_.find(quote, pos_);
    if (end == std::string::npos) fail("unterminated string");
    std::string out = s_.substr(pos_, end - pos_);
    pos_ = end + 1;
    return out;
  }
  bool read_bool() {
    skip_space();
    if (s_.compare(pos_, 4, "True") == 0) {
      pos_ += 4;
      return true;
    }
    if (s_.compare(pos_, 5, "False") == 0) {
      pos_ += 5;
      return false;
    }
    fail("expected True or False");
  }
  std::vector<int64_t> read_int_tuple() {
    std::vector<int64_t> out;
    expect('(');
    bool comma = false;
    while (!try_consume(')')) {
      out.push_back(read_dimension());
      comma = try_consume(',');
      if (!comma) {
        expect(')');
        break;
      }
    }
    // "(5)" is the int 5 in Python, not a tuple.
    if (out.size() == 1 && !comma) fail("the shape is not a tuple (a 1-d shape is written (n,))");
    return out;
  }
  // Only spaces and the like may follow the closing brace.
  void expect_end() {
    skip_space();
    if (pos_ != s_.size()) fail("unexpected text after the closing '}'");
  }
  [[noreturn]] void fail(const std::string& why) const {
    throw ValueError(path_ + ": malformed .npy header (" + why + " at offset " +
                     std::to_string(pos_) + "): " + printable(s_));
  }

 private:
  int64_t read_dimension() {
    skip_space();
    size_t start = pos_;
    while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) ++pos_;
    if (start == pos_) fail("expected a non-negative integer in shape");
    // Python 3 refuses "07".
    if (s_[start] == '0' && pos_ - start > 1) fail("leading zero in a shape dimension");
    int64_t d = 0;
    const auto [end, ec] = std::from_chars(s_.data() + start, s_.data() + pos_, d);
    if (ec != std::errc() || end != s_.data() + pos_) {
      fail("shape dimension " + s_.substr(start, pos_ - start) + " does not fit int64");
    }
    skip_space();
    if (python2_longs_ && pos_ < s_.size() && s_[pos_] == 'L') ++pos_;
    return d;
  }
  // The white space Python allows between tokens inside brackets.
  void skip_space() {
    while (pos_ < s_.size() && s_[pos_] != '\0' && std::strchr(" \t\n\r\f", s_[pos_]) != nullptr) {
      ++pos_;
    }
  }
  const std::string& s_;
  const std::string& path_;
  bool python2_longs_;
  size_t pos_ = 0;
};

}  // namespace

uint64_t npy_header_length(const std::string& first, const std::string& path) {
  if (first.size() < 10 || std::memcmp(first.data(), kMagic, kMagicLen) != 0) {
    throw ValueError(path +
                     ": not a .npy file (missing the \\x93NUMPY magic); to open a raw "
                     "binary file pass shape= and dtype=");
  }
  const auto major = static_cast<unsigned char>(first[6]);
  const auto minor = static_cast<unsigned char>(first[7]);
  if ((major != 1 && major != 2 && major != 3) || minor != 0) {
    throw ValueError(path + ": unsupported .npy format version " + std::to_string(major) + "." +
                     std::to_string(minor) + " (NumPy writes 1.0, 2.0 and 3.0)");
  }
  uint64_t prefix = 10, len = 0;
  if (major == 1) {
    len = static_cast<unsigned char>(first[8]) | (static_cast<unsigned char>(first[9]) << 8);
  } else {
    if (first.size() < 12) throw ValueError(path + ": truncated .npy header");
    prefix = 12;
    for (int i = 3; i >= 0; --i) len = (len << 8) | static_cast<unsigned char>(first[8 + i]);
  }
  if (len > kMaxNpyHeaderText) {
    throw ValueError(path + ": the .npy header is " + std::to_string(len) +
                     " bytes long, more than NumPy's limit of " +
                     std::to_string(kMaxNpyHeaderText) +
                     " (numpy.load's max_header_size); Jask refuses it too");
  }
  return prefix + len;
}

NpyHeader parse_npy_header(const std::string& bytes, const std::string& path) {
  uint64_t total = npy_header_length(bytes, path);
  if (bytes.size() < total) throw ValueError(path + ": truncated .npy header");
  const auto major = static_cast<unsigned char>(bytes[6]);
  const size_t dict_start = major == 1 ? 10 : 12;
  std::string dict = bytes.substr(dict_start, total - dict_start);
  // Version 1.0 and 2.0 headers are latin-1, 3.0 is UTF-8: every header
  // numpy writes for the dtypes Jask stores is ASCII.
  for (size_t i = 0; i < dict.size(); ++i) {
    const auto c = static_cast<unsigned char>(dict[i]);
    if (c >= 0x80) {
      throw ValueError(path + ": malformed .npy header (non-ASCII byte " +
                       printable(dict.substr(i, 1)) + " at offset " + std::to_string(i) +
                       "): " + printable(dict));
    }
  }
  LiteralReader reader(dict, path, /*python2_longs=*/major < 3);
  std::string descr;
  bool fortran = false, have_descr = false, have_fortran = false, have_shape = false;
  std::vector<int64_t> shape;
  reader.expect('{');
  while (!reader.try_consume('}')) {
    std::string key = reader.read_string();
    reader.expect(':');
    if (key == "descr") {
      if (reader.try_consume('[')) {
        throw TypeError(path + ": structured dtypes are not supported; Jask stores " +
                        dtype_names());
      }
      descr = reader.read_string();
      have_descr = true;
    } else if (key == "fortran_order") {
      fortran = reader.read_bool();
      have_fortran = true;
    } else if (key == "shape") {
      shape = reader.read_int_tuple();
      have_shape = true;
    } else {
      reader.fail("unexpected key '" + printable(key) + "'");
    }
    if (!reader.try_consume(',')) {
      reader.expect('}');
      break;
    }
  }
  reader.expect_end();
  if (!have_descr || !have_fortran || !have_shape) {
    reader.fail("the keys must be 'descr', 'fortran_order' and 'shape'");
  }
  if (shape.size() > kMaxNpyDims) {
    throw ValueError(path + ": the .npy shape has " + std::to_string(shape.size()) +
                     " dimensions; NumPy reads at most " + std::to_string(kMaxNpyDims));
  }
  if (fortran) {
    throw ValueError(path + ": Fortran-order .npy files are not supported; Jask reads C order");
  }
  auto dtype = dtype_from_descr(descr);
  if (!dtype) {
    throw TypeError(path + ": unsupported dtype '" + printable(descr) + "'; Jask stores " +
                    dtype_names() + " (little-endian)");
  }
  return NpyHeader{*dtype, shape, total};
}

std::string make_npy_header(DType dtype, const std::vector<int64_t>& shape) {
  std::string dict = "{'descr': '" + npy_descr(dtype) + "', 'fortran_order': False, 'shape': (";
  for (size_t i = 0; i < shape.size(); ++i) {
    dict += std::to_string(shape[i]);
    if (shape.size() == 1 || i + 1 < shape.size()) dict += ",";
    if (i + 1 < shape.size()) dict += " ";
  }
  dict += "), }";
  // Version 1.0 has a 10-byte prefix; pad with spaces and end in '\n' so the
  // data starts on a kDataAlignment boundary.
  uint64_t min_total = 10 + dict.size() + 1;
  uint64_t total = (min_total + kDataAlignment - 1) / kDataAlignment * kDataAlignment;
  uint64_t dict_len = total - 10;
  std::string out(kMagic, kMagicLen);
  out += static_cast<char>(1);
  out += static_cast<char>(0);
  out += static_cast<char>(dict_len & 0xff);
  out += static_cast<char>((dict_len >> 8) & 0xff);
  out += dict;
  out.append(dict_len - dict.size() - 1, ' ');
  out += '\n';
  return out;
}

namespace {

class NpyFormat final : public Format {
 public:
  std::string_view name() const override { return "npy"; }

  bool detect(std::string_view leading, std::string_view) const override {
    return leading.substr(0, kMagicLen) == std::string_view(kMagic, kMagicLen);
  }

  ArrayHeader read_header(const File& file, const IoPolicy& io, const std::string& path,
                          const OpenOptions&) const override {
    const uint64_t size = file.size();
    std::string prefix(std::min<uint64_t>(size, 12), '\0');
    file.read_at(prefix.data(), prefix.size(), 0, io);
    const uint64_t header_len = npy_header_length(prefix, path);
    if (header_len > size) throw ValueError(path + ": truncated .npy header");
    std::string header(header_len, '\0');
    file.read_at(header.data(), header.size(), 0, io);
    NpyHeader h = parse_npy_header(header, path);
    ArrayInfo info{h.dtype, h.shape};
    const uint64_t nbytes = check_sizes(info, path, h.data_offset);
    if (size - h.data_offset < nbytes) {
      throw ValueError(path + " is too short: " + info.describe() + " needs " +
                       std::to_string(nbytes) + " data bytes after the " +
                       std::to_string(h.data_offset) + "-byte header, but the file has only " +
                       std::to_string(size - h.data_offset));
    }
    return ArrayHeader{std::move(info), Layout::contiguous(h.data_offset)};
  }

  Layout new_layout(const ArrayInfo& info) const override {
    return Layout::contiguous(make_npy_header(info.dtype, info.shape).size());
  }

  void write_header(const File& file, const IoPolicy& io, const ArrayInfo& info) const override {
    const std::string header = make_npy_header(info.dtype, info.shape);
    file.write_at(header.data(), header.size(), 0, io);
  }
};

}  // namespace

const Format& npy_format() {
  static const NpyFormat format;
  return format;
}

}  // namespace jask
