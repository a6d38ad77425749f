// The codecs of chunked arrays (Zarr, HDF5, .npz): each stored chunk's bytes
// pass through a pipeline of steps, decoded on read and encoded on write.
// Compressors come from libzstd, zlib and c-blosc 1.x; a build without one
// raises NotImplementedError when a step needs it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace jask {

enum class CodecKind {
  kZstd,        // zstd frames; encode param: level
  kZlib,        // zlib stream (windowBits 15); encode param: level
  kGzip,        // gzip member (windowBits 16 + 15); encode param: level
  kDeflate,     // raw deflate (windowBits -15); encode param: level
  kBlosc,       // a c-blosc 1.x frame; encode param: clevel | shuffle << 8 | cname << 16
  kShuffle,     // HDF5 byte shuffle; param: itemsize
  kCrc32c,      // last 4 bytes: little-endian CRC32C of the rest
  kFletcher32,  // last 4 bytes: HDF5's Fletcher-32 checksum (stripped, not verified)
  kByteswap,    // elements of `param` bytes change byte order
  kSkip,        // the first `param` decoded bytes are not data (decode only)
  kOrderF,      // the chunk's elements are in Fortran order
};

struct CodecStep {
  CodecKind kind;
  int64_t param = 0;
};

// The step called `name` ("zstd", "blosc", ...); NotImplementedError for an
// unknown name or a compressor this build lacks. `what` names the array.
CodecStep codec_step(const std::string& name, int64_t param, const std::string& what);
bool is_stream_codec(CodecKind kind);  // zlib, gzip, deflate

// Bytes [data, data + size) of one chunk while a pipeline runs over it.
struct ChunkBytes {
  std::byte* data;
  size_t size;
};

// Decodes `in` through one step into `out` (capacity `out_cap`), or in place
// (returning a sub-range of `in`) for the steps that only strip, swap or skip.
// `chunk_shape`/`itemsize` serve order_f. Corrupt data: ValueError naming `what`.
ChunkBytes decode_step(const CodecStep& step, ChunkBytes in, std::byte* out, size_t out_cap,
                       const std::vector<int64_t>& chunk_shape, size_t itemsize,
                       const std::string& what);
// Whether decode_step writes into `out` (else it works in place).
bool decodes_out_of_place(CodecKind kind);

// The most bytes encode_step may write for `in_size` input bytes.
size_t encode_bound(const CodecStep& step, size_t in_size);
// Encodes `in` into `out` (capacity encode_bound), returning the bytes written.
size_t encode_step(const CodecStep& step, const std::byte* in, size_t in_size, std::byte* out,
                   size_t out_cap, const std::vector<int64_t>& chunk_shape, size_t itemsize,
                   const std::string& what);

// CRC32C (Castagnoli), continuing from `value` (0 to start), as zarr v3's
// crc32c codec and Python's crc32c.crc32c compute it.
uint32_t crc32c(const void* data, size_t size, uint32_t value = 0);

// The C-order transpose of a Fortran-order chunk of `shape` (and back).
void fortran_to_c(const std::byte* in, std::byte* out, const std::vector<int64_t>& shape,
                  size_t itemsize);
void c_to_fortran(const std::byte* in, std::byte* out, const std::vector<int64_t>& shape,
                  size_t itemsize);

// An inflate stream (zlib, gzip or raw deflate) read piece by piece.
class InflateStream {
 public:
  explicit InflateStream(CodecKind kind);
  ~InflateStream();
  InflateStream(const InflateStream&) = delete;
  InflateStream& operator=(const InflateStream&) = delete;
  // Starts over from the first compressed byte.
  void reset();
  // Feeds compressed bytes; `more_input()` says whether it wants them: false after a call
  // that filled its output (zlib may still hold output with no input left).
  void feed(const std::byte* in, size_t size);
  bool more_input() const;
  // Inflates up to `size` bytes into `out`, returning how many (0 at the
  // stream's end or when it needs input). Corrupt data: ValueError naming `what`.
  size_t inflate(std::byte* out, size_t size, const std::string& what);
  bool finished() const { return finished_; }

 private:
  struct State;
  State* state_;
  CodecKind kind_;
  bool finished_ = false;
  bool output_full_ = false;  // the last call filled its output
};

}  // namespace jask
