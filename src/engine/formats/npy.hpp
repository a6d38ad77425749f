// The .npy format plug-in. The header is parsed with a small literal parser
// (never pickle), and written padded so the data starts at a 4096-byte
// boundary (for O_DIRECT).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "base/dtype.hpp"
#include "formats/format.hpp"

namespace jask {

inline constexpr uint64_t kDataAlignment = 4096;
// The longest header dict (the text after the length field) a .npy file may
// have: numpy.load's default max_header_size (_MAX_HEADER_SIZE), so Jask
// opens the headers NumPy opens and never reads a huge one whole.
inline constexpr uint64_t kMaxNpyHeaderText = 10000;
// The most dimensions numpy.load reads (NPY_MAXDIMS): a longer shape is refused as it is.
inline constexpr size_t kMaxNpyDims = 64;

struct NpyHeader {
  DType dtype;
  std::vector<int64_t> shape;
  uint64_t data_offset;
};

// Parses the header at the start of `bytes` (at least the whole header).
// `path` is only used in error messages.
NpyHeader parse_npy_header(const std::string& bytes, const std::string& path);

// Bytes needed to hold the header, given the first 12 bytes of the file.
uint64_t npy_header_length(const std::string& first_bytes, const std::string& path);

// Complete header (magic, version, dict, padding); its size is a multiple of
// kDataAlignment.
std::string make_npy_header(DType dtype, const std::vector<int64_t>& shape);

const Format& npy_format();

}  // namespace jask
