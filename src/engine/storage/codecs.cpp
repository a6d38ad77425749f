#include "storage/codecs.hpp"

#include <algorithm>
#include <array>
#include <cstring>

#include "base/errors.hpp"

#if JASK_HAVE_ZSTD
#include <zstd.h>
#endif
#if JASK_HAVE_ZLIB
#include <zlib.h>
#endif
#if JASK_HAVE_BLOSC
#include <blosc.h>
#endif

namespace jask {
namespace {

[[noreturn, maybe_unused]] void missing_library(const char* lib, const char* package) {
  throw NotImplementedError(std::string("Jask was built without ") + lib + " (install " + package +
                            " and reinstall)");
}

void require(CodecKind kind) {
  switch (kind) {
    case CodecKind::kZstd:
#if !JASK_HAVE_ZSTD
      missing_library("zstd", "libzstd-dev");
#endif
      return;
    case CodecKind::kZlib:
    case CodecKind::kGzip:
    case CodecKind::kDeflate:
#if !JASK_HAVE_ZLIB
      missing_library("zlib", "zlib1g-dev");
#endif
      return;
    case CodecKind::kBlosc:
#if !JASK_HAVE_BLOSC
      missing_library("blosc", "libblosc-dev");
#endif
      return;
    default: return;
  }
}

[[noreturn]] void corrupt(const std::string& what, const std::string& why) {
  throw ValueError(what + ": corrupt chunk: " + why);
}

// ---- CRC32C: SSE4.2's crc32 instruction where the CPU has it, else a table.

std::array<uint32_t, 256> crc_table() {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    t[i] = c;
  }
  return t;
}

uint32_t crc_by_table(uint32_t crc, const unsigned char* p, size_t n) {
  static const std::array<uint32_t, 256> table = crc_table();
  for (size_t i = 0; i < n; ++i) crc = table[(crc ^ p[i]) & 0xFF] ^ (crc >> 8);
  return crc;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) uint32_t crc_by_instruction(uint32_t crc, const unsigned char* p,
                                                              size_t n) {
  uint64_t c = crc;
  for (; n >= 8; n -= 8, p += 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);
    c = __builtin_ia32_crc32di(c, word);
  }
  uint32_t c32 = static_cast<uint32_t>(c);
  for (; n > 0; --n, ++p) c32 = __builtin_ia32_crc32qi(c32, *p);
  return c32;
}
#endif

uint32_t load_le32(const std::byte* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;  // little-endian hosts only (x86-64, aarch64 as Jask runs them)
}

// HDF5's Fletcher-32 (H5_checksum_fletcher32): sums of big-endian 16-bit words.
uint32_t fletcher32(const std::byte* p, size_t n) {
  const auto* data = reinterpret_cast<const unsigned char*>(p);
  uint32_t sum1 = 0, sum2 = 0;
  for (size_t words = n / 2; words > 0;) {
    size_t block = std::min<size_t>(words, 360);
    words -= block;
    for (; block > 0; --block, data += 2) {
      sum1 += static_cast<uint32_t>(data[0]) << 8 | data[1];
      sum2 += sum1;
    }
    sum1 = (sum1 & 0xffff) + (sum1 >> 16);
    sum2 = (sum2 & 0xffff) + (sum2 >> 16);
  }
  if (n % 2) {
    sum1 += static_cast<uint32_t>(*data) << 8;
    sum2 += sum1;
    sum1 = (sum1 & 0xffff) + (sum1 >> 16);
    sum2 = (sum2 & 0xffff) + (sum2 >> 16);
  }
  sum1 = (sum1 & 0xffff) + (sum1 >> 16);
  sum2 = (sum2 & 0xffff) + (sum2 >> 16);
  return sum2 << 16 | sum1;
}

// ---- Byte shuffle (HDF5's filter): byte j of element i at j * n + i.

void shuffle(const std::byte* in, std::byte* out, size_t size, size_t isz) {
  const size_t n = size / isz;
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < isz; ++j) out[j * n + i] = in[i * isz + j];
  std::memcpy(out + n * isz, in + n * isz, size - n * isz);
}

void unshuffle(const std::byte* in, std::byte* out, size_t size, size_t isz) {
  const size_t n = size / isz;
  for (size_t j = 0; j < isz; ++j) {
    const std::byte* plane = in + j * n;
    for (size_t i = 0; i < n; ++i) out[i * isz + j] = plane[i];
  }
  std::memcpy(out + n * isz, in + n * isz, size - n * isz);
}

void byteswap(std::byte* p, size_t size, size_t isz, const std::string& what) {
  if (isz <= 1) return;
  if (size % isz != 0) corrupt(what, std::to_string(size) + " bytes is not whole elements");
  for (size_t at = 0; at < size; at += isz) std::reverse(p + at, p + at + isz);
}

// Transposes between C order and Fortran order: `from_c` reads C order.
void transpose_order(const std::byte* in, std::byte* out, const std::vector<int64_t>& shape,
                     size_t isz, bool from_c) {
  const size_t nd = shape.size();
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  if (nd <= 1 || n == 0) {
    std::memcpy(out, in, static_cast<size_t>(n) * isz);
    return;
  }
  std::vector<int64_t> fstride(nd);  // Fortran strides in elements
  int64_t s = 1;
  for (size_t d = 0; d < nd; ++d) {
    fstride[d] = s;
    s *= shape[d];
  }
  std::vector<int64_t> idx(nd, 0);
  const int64_t last = shape[nd - 1], last_stride = fstride[nd - 1];
  for (int64_t c = 0; c < n; c += last) {
    int64_t f = 0;
    for (size_t d = 0; d + 1 < nd; ++d) f += idx[d] * fstride[d];
    for (int64_t k = 0; k < last; ++k, f += last_stride) {
      const int64_t src = from_c ? c + k : f, dst = from_c ? f : c + k;
      std::memcpy(out + dst * isz, in + src * isz, isz);
    }
    for (size_t d = nd - 1; d-- > 0;) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
}

#if JASK_HAVE_ZLIB
int window_bits(CodecKind kind) {
  return kind == CodecKind::kGzip ? 16 + 15 : kind == CodecKind::kDeflate ? -15 : 15;
}

// zlib counts a call's input and output in uInt (32 bits): buffers are passed in pieces.
constexpr size_t kZlibPiece = size_t{1} << 30;

uInt zlib_piece(size_t left) { return static_cast<uInt>(std::min(left, kZlibPiece)); }

size_t inflate_all(CodecKind kind, ChunkBytes in, std::byte* out, size_t cap,
                   const std::string& what, size_t* unused = nullptr) {
  z_stream z{};
  if (inflateInit2(&z, window_bits(kind)) != Z_OK) throw std::bad_alloc();
  z.next_in = reinterpret_cast<Bytef*>(in.data);
  z.next_out = reinterpret_cast<Bytef*>(out);
  size_t in_left = in.size, out_left = cap;
  int rc = Z_OK;
  while (rc == Z_OK) {
    z.avail_in = zlib_piece(in_left);
    z.avail_out = zlib_piece(out_left);
    const uInt in_given = z.avail_in, out_given = z.avail_out;
    rc = ::inflate(&z, Z_NO_FLUSH);
    in_left -= in_given - z.avail_in;
    out_left -= out_given - z.avail_out;
    if (rc == Z_BUF_ERROR && in_left > 0 && out_left > 0) rc = Z_OK;  // a piece ran out
  }
  const char* msg = z.msg;
  inflateEnd(&z);
  if (rc == Z_STREAM_END) {
    if (unused != nullptr) *unused = in_left;
    return cap - out_left;
  }
  if (rc == Z_BUF_ERROR && out_left == 0)
    corrupt(what, "it inflates to more than the " + std::to_string(cap) + " bytes expected");
  corrupt(what, std::string("inflate failed (") + (msg ? msg : "truncated data") + ")");
}

// A zarr gzip chunk: one gzip member, then nothing but zero padding (what
// Python's gzip module, so numcodecs and zarr-python, reads; other bytes
// there are "Not a gzipped file").
size_t gunzip_chunk(ChunkBytes in, std::byte* out, size_t cap, const std::string& what) {
  size_t unused = 0;
  const size_t n = inflate_all(CodecKind::kGzip, in, out, cap, what, &unused);
  std::byte* tail = in.data + (in.size - unused);
  if (!std::all_of(tail, in.data + in.size, [](std::byte b) { return b == std::byte{0}; }))
    corrupt(what, "gzip: " + std::to_string(unused) + " bytes after the member are not padding");
  return n;
}

size_t deflate_all(CodecKind kind, int level, const std::byte* in, size_t size, std::byte* out,
                   size_t cap) {
  z_stream z{};
  if (deflateInit2(&z, level, Z_DEFLATED, window_bits(kind), 8, Z_DEFAULT_STRATEGY) != Z_OK)
    throw ValueError("zlib: bad compression level " + std::to_string(level));
  z.next_in = reinterpret_cast<Bytef*>(const_cast<std::byte*>(in));
  z.next_out = reinterpret_cast<Bytef*>(out);
  size_t in_left = size, out_left = cap;
  int rc = Z_OK;
  while (rc == Z_OK && out_left > 0) {
    z.avail_in = zlib_piece(in_left);
    z.avail_out = zlib_piece(out_left);
    const uInt in_given = z.avail_in, out_given = z.avail_out;
    rc = ::deflate(&z, in_left == in_given ? Z_FINISH : Z_NO_FLUSH);
    in_left -= in_given - z.avail_in;
    out_left -= out_given - z.avail_out;
  }
  deflateEnd(&z);
  if (rc != Z_STREAM_END) throw std::logic_error("deflate: output bound too small");
  return cap - out_left;
}
#endif

}  // namespace

CodecStep codec_step(const std::string& name, int64_t param, const std::string& what) {
  static const std::pair<const char*, CodecKind> kNames[] = {
      {"zstd", CodecKind::kZstd},         {"zlib", CodecKind::kZlib},
      {"gzip", CodecKind::kGzip},         {"deflate", CodecKind::kDeflate},
      {"blosc", CodecKind::kBlosc},       {"shuffle", CodecKind::kShuffle},
      {"crc32c", CodecKind::kCrc32c},     {"fletcher32", CodecKind::kFletcher32},
      {"byteswap", CodecKind::kByteswap}, {"skip", CodecKind::kSkip},
      {"order_f", CodecKind::kOrderF}};
  for (const auto& [n, kind] : kNames) {
    if (name != n) continue;
    require(kind);
    if (param < 0) throw ValueError(what + ": codec " + name + " has a negative parameter");
    return CodecStep{kind, param};
  }
  throw NotImplementedError(what + ": unknown codec '" + name +
                            "' (Jask reads zstd, zlib, gzip, deflate, blosc, shuffle, crc32c, "
                            "fletcher32, byteswap, skip, order_f)");
}

bool is_stream_codec(CodecKind kind) {
  return kind == CodecKind::kZlib || kind == CodecKind::kGzip || kind == CodecKind::kDeflate;
}

bool decodes_out_of_place(CodecKind kind) {
  switch (kind) {
    case CodecKind::kCrc32c:
    case CodecKind::kFletcher32:
    case CodecKind::kByteswap:
    case CodecKind::kSkip: return false;
    default: return true;
  }
}

uint32_t crc32c(const void* data, size_t size, uint32_t value) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint32_t crc = ~value;
#if defined(__x86_64__)
  static const bool has_sse42 = __builtin_cpu_supports("sse4.2");
  crc = has_sse42 ? crc_by_instruction(crc, p, size) : crc_by_table(crc, p, size);
#else
  crc = crc_by_table(crc, p, size);
#endif
  return ~crc;
}

void fortran_to_c(const std::byte* in, std::byte* out, const std::vector<int64_t>& shape,
                  size_t itemsize) {
  transpose_order(in, out, shape, itemsize, /*from_c=*/false);
}

void c_to_fortran(const std::byte* in, std::byte* out, const std::vector<int64_t>& shape,
                  size_t itemsize) {
  transpose_order(in, out, shape, itemsize, /*from_c=*/true);
}

ChunkBytes decode_step(const CodecStep& step, ChunkBytes in, std::byte* out, size_t out_cap,
                       const std::vector<int64_t>& chunk_shape, size_t itemsize,
                       const std::string& what) {
  switch (step.kind) {
    case CodecKind::kZstd: {
#if JASK_HAVE_ZSTD
      const size_t n = ZSTD_decompress(out, out_cap, in.data, in.size);
      if (ZSTD_isError(n)) corrupt(what, std::string("zstd: ") + ZSTD_getErrorName(n));
      return {out, n};
#else
      missing_library("zstd", "libzstd-dev");
#endif
    }
    case CodecKind::kZlib:
    case CodecKind::kGzip:
    case CodecKind::kDeflate:
#if JASK_HAVE_ZLIB
      if (step.kind == CodecKind::kGzip) return {out, gunzip_chunk(in, out, out_cap, what)};
      return {out, inflate_all(step.kind, in, out, out_cap, what)};
#else
      missing_library("zlib", "zlib1g-dev");
#endif
    case CodecKind::kBlosc: {
#if JASK_HAVE_BLOSC
      size_t nbytes = 0, cbytes = 0, blocksize = 0;
      if (in.size < BLOSC_MIN_HEADER_LENGTH) corrupt(what, "blosc: shorter than its header");
      blosc_cbuffer_sizes(in.data, &nbytes, &cbytes, &blocksize);
      if (cbytes > in.size || nbytes > out_cap) {
        corrupt(what, "blosc: the header says " + std::to_string(cbytes) + " stored and " +
                          std::to_string(nbytes) + " decoded bytes, the chunk has " +
                          std::to_string(in.size) + " and " + std::to_string(out_cap) +
                          " are expected");
      }
      const int n = blosc_decompress_ctx(in.data, out, out_cap, 1);
      if (n < 0) corrupt(what, "blosc: decompression failed (" + std::to_string(n) + ")");
      return {out, static_cast<size_t>(n)};
#else
      missing_library("blosc", "libblosc-dev");
#endif
    }
    case CodecKind::kShuffle:
      if (in.size > out_cap) corrupt(what, "larger than a chunk");
      unshuffle(in.data, out, in.size, static_cast<size_t>(std::max<int64_t>(step.param, 1)));
      return {out, in.size};
    case CodecKind::kCrc32c: {
      if (in.size < 4) corrupt(what, "shorter than its 4-byte CRC32C");
      const uint32_t stored = load_le32(in.data + in.size - 4);
      const uint32_t actual = crc32c(in.data, in.size - 4);
      if (stored != actual) {
        corrupt(what, "CRC32C mismatch (stored " + std::to_string(stored) + ", computed " +
                          std::to_string(actual) + ")");
      }
      return {in.data, in.size - 4};
    }
    case CodecKind::kFletcher32: {
      if (in.size < 4) corrupt(what, "shorter than its 4-byte Fletcher-32 checksum");
      const uint32_t stored = load_le32(in.data + in.size - 4);
      const uint32_t actual = fletcher32(in.data, in.size - 4);
      // HDF5 before 1.6.3 wrote the checksum with its bytes swapped: accepted too.
      const uint32_t swapped = (actual & 0xFF00FF00u) >> 8 | (actual & 0x00FF00FFu) << 8;
      if (stored != actual && stored != swapped) {
        corrupt(what, "Fletcher-32 mismatch (stored " + std::to_string(stored) + ", computed " +
                          std::to_string(actual) + ")");
      }
      return {in.data, in.size - 4};
    }
    case CodecKind::kByteswap:
      byteswap(in.data, in.size, static_cast<size_t>(step.param), what);
      return in;
    case CodecKind::kSkip: {
      const size_t n = static_cast<size_t>(step.param);
      if (n > in.size) corrupt(what, "shorter than the " + std::to_string(n) + " bytes skipped");
      return {in.data + n, in.size - n};
    }
    case CodecKind::kOrderF: {
      int64_t numel = 1;
      for (int64_t d : chunk_shape) numel *= d;
      if (in.size != static_cast<size_t>(numel) * itemsize || in.size > out_cap) {
        corrupt(what, "order_f: " + std::to_string(in.size) + " bytes, expected " +
                          std::to_string(numel * static_cast<int64_t>(itemsize)));
      }
      fortran_to_c(in.data, out, chunk_shape, itemsize);
      return {out, in.size};
    }
  }
  throw std::logic_error("unknown codec kind");
}

size_t encode_bound(const CodecStep& step, size_t in_size) {
  switch (step.kind) {
#if JASK_HAVE_ZSTD
    case CodecKind::kZstd: return ZSTD_compressBound(in_size);
#endif
#if JASK_HAVE_ZLIB
    case CodecKind::kZlib:
    case CodecKind::kGzip:
    case CodecKind::kDeflate: return compressBound(static_cast<uLong>(in_size)) + 32;
#endif
#if JASK_HAVE_BLOSC
    case CodecKind::kBlosc: return in_size + BLOSC_MAX_OVERHEAD;
#endif
    case CodecKind::kCrc32c:
    case CodecKind::kFletcher32: return in_size + 4;
    default: return in_size;
  }
}

size_t encode_step(const CodecStep& step, const std::byte* in, size_t in_size, std::byte* out,
                   size_t out_cap, const std::vector<int64_t>& chunk_shape, size_t itemsize,
                   const std::string& what) {
  require(step.kind);
  (void)out_cap;  // unused when built without the compressors
  switch (step.kind) {
#if JASK_HAVE_ZSTD
    case CodecKind::kZstd: {
      const size_t n = ZSTD_compress(out, out_cap, in, in_size, static_cast<int>(step.param));
      if (ZSTD_isError(n)) throw ValueError(what + ": zstd: " + ZSTD_getErrorName(n));
      return n;
    }
#endif
#if JASK_HAVE_ZLIB
    case CodecKind::kZlib:
    case CodecKind::kGzip:
    case CodecKind::kDeflate:
      return deflate_all(step.kind, static_cast<int>(step.param), in, in_size, out, out_cap);
#endif
#if JASK_HAVE_BLOSC
    case CodecKind::kBlosc: {
      static const char* const kNames[] = {"blosclz", "lz4", "lz4hc", "zlib", "zstd"};
      const int clevel = static_cast<int>(step.param & 0xFF);
      const int shuffle_mode = static_cast<int>((step.param >> 8) & 0xFF);
      const int64_t cname = step.param >> 16;
      if (cname >= 5 || clevel > 9 || shuffle_mode > 2)
        throw ValueError(what + ": bad blosc parameter " + std::to_string(step.param));
      const int n = blosc_compress_ctx(clevel, shuffle_mode, itemsize, in_size, in, out, out_cap,
                                       kNames[cname], 0, 1);
      if (n <= 0) throw ValueError(what + ": blosc compression failed (" + std::to_string(n) + ")");
      return static_cast<size_t>(n);
    }
#endif
    case CodecKind::kShuffle:
      shuffle(in, out, in_size, static_cast<size_t>(std::max<int64_t>(step.param, 1)));
      return in_size;
    case CodecKind::kCrc32c:
    case CodecKind::kFletcher32: {
      if (step.kind == CodecKind::kFletcher32)
        throw NotImplementedError(what + ": Jask does not write Fletcher-32 checksums");
      const uint32_t crc = crc32c(in, in_size);
      std::memcpy(out, in, in_size);
      std::memcpy(out + in_size, &crc, 4);
      return in_size + 4;
    }
    case CodecKind::kByteswap:
      std::memcpy(out, in, in_size);
      byteswap(out, in_size, static_cast<size_t>(step.param), what);
      return in_size;
    case CodecKind::kSkip: throw ValueError(what + ": the skip codec only decodes");
    case CodecKind::kOrderF: c_to_fortran(in, out, chunk_shape, itemsize); return in_size;
    default: break;
  }
  throw std::logic_error("unknown codec kind");
}

// ---- InflateStream

#if JASK_HAVE_ZLIB
struct InflateStream::State {
  z_stream z{};
};

InflateStream::InflateStream(CodecKind kind) : state_(new State), kind_(kind) {
  if (inflateInit2(&state_->z, window_bits(kind)) != Z_OK) {
    delete state_;
    throw std::bad_alloc();
  }
}

InflateStream::~InflateStream() {
  inflateEnd(&state_->z);
  delete state_;
}

void InflateStream::reset() {
  inflateReset(&state_->z);
  state_->z.avail_in = 0;
  finished_ = false;
  output_full_ = false;
}

void InflateStream::feed(const std::byte* in, size_t size) {
  state_->z.next_in = reinterpret_cast<Bytef*>(const_cast<std::byte*>(in));
  state_->z.avail_in = static_cast<uInt>(size);
}

bool InflateStream::more_input() const {
  return !finished_ && !output_full_ && state_->z.avail_in == 0;
}

size_t InflateStream::inflate(std::byte* out, size_t size, const std::string& what) {
  if (finished_ || size == 0) return 0;
  z_stream& z = state_->z;
  z.next_out = reinterpret_cast<Bytef*>(out);
  z.avail_out = static_cast<uInt>(std::min<size_t>(size, 1u << 30));
  const uInt asked = z.avail_out;
  const int rc = ::inflate(&z, Z_NO_FLUSH);
  if (rc == Z_STREAM_END)
    finished_ = true;
  else if (rc != Z_OK && rc != Z_BUF_ERROR)
    corrupt(what, std::string("inflate failed (") + (z.msg ? z.msg : "bad data") + ")");
  // A call that filled the output may have consumed every input byte and still hold output
  // (the rest of a match, bits in zlib's accumulator): the stream wants no input until a call
  // leaves output room. (Taking this for "wants input" refused the last bytes of valid members
  // whose compressed end fell there as truncated.)
  output_full_ = z.avail_out == 0;
  return asked - z.avail_out;
}
#else
struct InflateStream::State {};
InflateStream::InflateStream(CodecKind) { missing_library("zlib", "zlib1g-dev"); }
InflateStream::~InflateStream() = default;
void InflateStream::reset() {}
void InflateStream::feed(const std::byte*, size_t) {}
bool InflateStream::more_input() const { return false; }
size_t InflateStream::inflate(std::byte*, size_t, const std::string&) { return 0; }
#endif

}  // namespace jask
