#include "formats/npy.hpp"

#include <algorithm>
#include <cctype>
#include <cstring>

#include "base/errors.hpp"

namespace jask {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;

// Minimal reader for the Python literal subset numpy writes in headers:
// {'key': 'str' | True | False | (int, ...), ...}
class LiteralReader {
 public:
  LiteralReader(const std::string& text, const std::string& path) : s_(text), path_(path) {}

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
    while (!try_consume(')')) {
      skip_space();
      size_t start = pos_;
      while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) ++pos_;
      if (start == pos_) fail("expected a non-negative integer in shape");
      // More than 18 digits may not fit int64 (std::stoll would throw out_of_range).
      if (pos_ - start > 18) fail("shape dimension too large");
      out.push_back(std::stoll(s_.substr(start, pos_ - start)));
      skip_space();
      if (s_[pos_] == 'L') ++pos_;  // Python 2 long suffix
      if (!try_consume(',')) {
        expect(')');
        break;
      }
    }
    return out;
  }
  [[noreturn]] void fail(const std::string& why) const {
    throw ValueError(path_ + ": malformed .npy header (" + why + " at offset " +
                     std::to_string(pos_) + "): " + s_);
  }

 private:
  void skip_space() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  const std::string& s_;
  const std::string& path_;
  size_t pos_ = 0;
};

}  // namespace

uint64_t npy_header_length(const std::string& first, const std::string& path) {
  if (first.size() < 10 || std::memcmp(first.data(), kMagic, kMagicLen) != 0) {
    throw ValueError(path +
                     ": not a .npy file (missing the \\x93NUMPY magic); to open a raw "
                     "binary file pass shape= and dtype=");
  }
  auto major = static_cast<unsigned char>(first[6]);
  if (major == 1) {
    uint16_t len =
        static_cast<unsigned char>(first[8]) | (static_cast<unsigned char>(first[9]) << 8);
    return 10 + len;
  }
  if (major == 2 || major == 3) {
    if (first.size() < 12) throw ValueError(path + ": truncated .npy header");
    uint32_t len = 0;
    for (int i = 3; i >= 0; --i) len = (len << 8) | static_cast<unsigned char>(first[8 + i]);
    return 12 + static_cast<uint64_t>(len);
  }
  throw ValueError(path + ": unsupported .npy format version " + std::to_string(major));
}

NpyHeader parse_npy_header(const std::string& bytes, const std::string& path) {
  uint64_t total = npy_header_length(bytes, path);
  if (bytes.size() < total) throw ValueError(path + ": truncated .npy header");
  size_t dict_start = static_cast<unsigned char>(bytes[6]) == 1 ? 10 : 12;
  std::string dict = bytes.substr(dict_start, total - dict_start);
  LiteralReader reader(dict, path);
  std::string descr;
  bool fortran = false, have_descr = false, have_shape = false;
  std::vector<int64_t> shape;
  reader.expect('{');
  while (!reader.try_consume('}')) {
    std::string key = reader.read_string();
    reader.expect(':');
    if (key == "descr") {
      if (reader.try_consume('[')) {
        throw TypeError(path +
                        ": structured dtypes are not supported; Jask stores float32, "
                        "float64, float16, bfloat16 and int32");
      }
      descr = reader.read_string();
      have_descr = true;
    } else if (key == "fortran_order") {
      fortran = reader.read_bool();
    } else if (key == "shape") {
      shape = reader.read_int_tuple();
      have_shape = true;
    } else {
      reader.fail("unexpected key '" + key + "'");
    }
    if (!reader.try_consume(',')) {
      reader.expect('}');
      break;
    }
  }
  if (!have_descr || !have_shape) reader.fail("missing 'descr' or 'shape'");
  if (fortran) {
    throw ValueError(path + ": Fortran-order .npy files are not supported; Jask reads C order");
  }
  auto dtype = dtype_from_descr(descr);
  if (!dtype) {
    throw TypeError(path + ": unsupported dtype '" + descr +
                    "'; Jask stores float32, float64, float16, bfloat16 and int32 (little-endian)");
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
    if (size < h.data_offset + info.nbytes()) {
      throw ValueError(path + " is too short: " + info.describe() + " needs " +
                       std::to_string(info.nbytes()) + " data bytes after the " +
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
