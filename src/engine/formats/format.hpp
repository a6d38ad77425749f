// The interface every storage format implements: a format reads a file's
// header into what the array is (dtype, shape) and where its elements lie
// (a Layout), and writes the header of a new file. Formats are plug-ins,
// listed in formats/registry.cpp; the storage layer never names one except
// to create its own files (.npy).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "base/array_info.hpp"
#include "io/file.hpp"

namespace jask {

// Where an array's elements lie in its file. One kind today: a contiguous
// C-order range from data_offset(). Every reader reaches the bytes of an
// element range through for_each_extent (and aligns its buffers with
// byte_of), so a chunked layout (a chunk shape and the offset of each chunk)
// is one more kind here and in the format that produces it; the readers do
// not change. Contiguous calls inline to one multiply-add.
class Layout {
 public:
  static Layout contiguous(uint64_t data_offset) { return Layout(data_offset); }

  // The file offset of element 0.
  uint64_t data_offset() const { return data_offset_; }
  // The file offset of element `element` (C order).
  uint64_t byte_of(int64_t element, size_t itemsize) const {
    return data_offset_ + static_cast<uint64_t>(element) * itemsize;
  }
  // Calls extent(file offset, bytes, offset of those bytes in the range) for
  // each piece of elements [first, first + count) that is contiguous in the
  // file, in order.
  template <class Extent>
  void for_each_extent(int64_t first, int64_t count, size_t itemsize, Extent extent) const {
    extent(byte_of(first, itemsize), static_cast<size_t>(count) * itemsize, size_t{0});
  }
  // Elements from `first` on, seen as an array of their own (a view).
  Layout from_element(int64_t first, size_t itemsize) const {
    return Layout(byte_of(first, itemsize));
  }
  // The bytes [begin, end) of the file that hold the data of `info`: the
  // rest of the file (headers, other arrays) is not this array's.
  std::pair<uint64_t, uint64_t> data_bytes(const ArrayInfo& info) const {
    return {data_offset_, data_offset_ + info.nbytes()};
  }

 private:
  explicit Layout(uint64_t data_offset) : data_offset_(data_offset) {}
  uint64_t data_offset_;
};

// What a header says.
struct ArrayHeader {
  ArrayInfo info;
  Layout layout;
};

// What the caller says about the array, for what the format does not store:
// a raw file's dtype, shape and offset.
struct OpenOptions {
  bool writable = false;
  std::optional<ArrayInfo> info;
  uint64_t offset = 0;
};

class Format {
 public:
  virtual ~Format() = default;
  // The name users and the registry know it by ("npy").
  virtual std::string_view name() const = 0;
  // Whether a file whose first bytes are `leading` (kDetectBytes, fewer if
  // the file is shorter) and whose path is `path` is in this format.
  virtual bool detect(std::string_view leading, std::string_view path) const = 0;
  // Parses the header of `file` (reading with `io`) and checks that the file
  // holds every data byte; errors name `path`.
  virtual ArrayHeader read_header(const File& file, const IoPolicy& io, const std::string& path,
                                  const OpenOptions& options) const = 0;
  // Where the elements of `info` lie in a new file of this format.
  virtual Layout new_layout(const ArrayInfo& info) const = 0;
  // Writes the header of a new file that will hold `info` (at new_layout's
  // places); the caller sizes the file to hold the data.
  virtual void write_header(const File& file, const IoPolicy& io, const ArrayInfo& info) const = 0;
};

// How many leading bytes detection looks at.
inline constexpr size_t kDetectBytes = 16;

}  // namespace jask
