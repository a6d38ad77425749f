// Chunked arrays: codec round trips, CRC32C's known values, element ranges
// mapped onto a 3-D chunk grid (odd ranges, edge chunks, missing chunks read
// as the fill), corrupt chunks named in the error, and one decode per chunk
// for a sequential stream; a sparse table over a grid of 2**40 chunks,
// chunk shapes whose bytes wrap int64, and uncompressed chunks of the wrong
// length refused.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "base/errors.hpp"
#include "base/memory_budget.hpp"
#include "storage/chunked.hpp"
#include "storage/codecs.hpp"
#include "test_util.hpp"

namespace jask {
namespace {

using test::ScratchDir;
using test::TempDir;

std::vector<std::byte> as_bytes(const std::vector<float>& v) {
  std::vector<std::byte> b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

// Encodes `in` through `steps` (encoding order).
std::vector<std::byte> encode(const std::vector<CodecStep>& steps, std::vector<std::byte> in,
                              const std::vector<int64_t>& chunk_shape, size_t isz) {
  for (const CodecStep& s : steps) {
    std::vector<std::byte> out(encode_bound(s, in.size()));
    out.resize(encode_step(s, in.data(), in.size(), out.data(), out.size(), chunk_shape, isz, "t"));
    in = std::move(out);
  }
  return in;
}

TEST(Chunked, Crc32cKnownValues) {
  EXPECT_EQ(crc32c("123456789", 9), 0xE3069283u);
  EXPECT_EQ(crc32c("", 0), 0u);
  EXPECT_EQ(crc32c("6789", 4, crc32c("12345", 5)), 0xE3069283u);
  std::string zeros(32, '\0');
  EXPECT_EQ(crc32c(zeros.data(), zeros.size()), 0x8A9136AAu);  // RFC 3720 B.4
}

TEST(Chunked, CodecRoundTrips) {
  const std::vector<int64_t> chunk{3, 5, 7};
  std::vector<float> values(105);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i % 17) * 0.5f - 3.f;
  const std::vector<std::byte> raw = as_bytes(values);
  const std::vector<std::vector<CodecStep>> pipelines = {
      {{CodecKind::kZstd, 3}},
      {{CodecKind::kZlib, 6}},
      {{CodecKind::kGzip, 1}},
      {{CodecKind::kDeflate, 9}},
      {{CodecKind::kBlosc, 5 | 1 << 8 | 1 << 16}},  // lz4, byte shuffle
      {{CodecKind::kBlosc, 9 | 2 << 8 | 4 << 16}},  // zstd, bit shuffle
      {{CodecKind::kShuffle, 4}, {CodecKind::kZlib, 4}, {CodecKind::kCrc32c, 0}},
      {{CodecKind::kByteswap, 4}, {CodecKind::kOrderF, 0}, {CodecKind::kZstd, 1}},
  };
  for (const auto& steps : pipelines) {
    std::vector<std::byte> stored = encode(steps, raw, chunk, 4);
    // Decode in reverse order, ping-ponging like the source.
    const size_t stored_size = stored.size();
    std::vector<std::byte> a = stored;
    a.resize(stored_size + raw.size() + 64);
    std::vector<std::byte> b(a.size());
    ChunkBytes cur{a.data(), stored_size};
    for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
      std::byte* out = cur.data >= a.data() && cur.data < a.data() + a.size() ? b.data() : a.data();
      cur = decode_step(*it, cur, out, a.size(), chunk, 4, "t");
    }
    ASSERT_EQ(cur.size, raw.size());
    EXPECT_EQ(std::memcmp(cur.data, raw.data(), raw.size()), 0) << static_cast<int>(steps[0].kind);
  }
}

TEST(Chunked, OrderFTransposesTheChunk) {
  // A (2, 3) chunk in Fortran order: columns first.
  const std::vector<float> f = {0, 3, 1, 4, 2, 5}, c = {0, 1, 2, 3, 4, 5};
  std::vector<float> out(6);
  fortran_to_c(reinterpret_cast<const std::byte*>(f.data()),
               reinterpret_cast<std::byte*>(out.data()), {2, 3}, 4);
  EXPECT_EQ(out, c);
  c_to_fortran(reinterpret_cast<const std::byte*>(c.data()),
               reinterpret_cast<std::byte*>(out.data()), {2, 3}, 4);
  EXPECT_EQ(out, f);
}

TEST(Chunked, UnknownCodecIsNotImplemented) {
  EXPECT_THROW(codec_step("lzma", 0, "x.zarr"), NotImplementedError);
}

// A (5, 7, 9) float32 array in zstd chunks of (2, 3, 4) in one file; chunks
// in `missing` are not stored. Element i holds i.
struct ChunkedFixture {
  std::vector<int64_t> shape{5, 7, 9}, chunk{2, 3, 4}, grid{3, 3, 3};
  std::vector<float> expected;
  ChunkTable table;

  ChunkedFixture(const std::string& file, const std::vector<int64_t>& missing, float fill) {
    expected.resize(5 * 7 * 9);
    std::iota(expected.begin(), expected.end(), 0.f);
    table.path = file;
    table.name = "a";
    table.info = ArrayInfo{DType::f32, shape};
    table.chunk_shape = chunk;
    table.codecs = {{CodecKind::kZstd, 0}};
    table.files = {file};
    table.fill.resize(4);
    std::memcpy(table.fill.data(), &fill, 4);
    std::vector<char> bytes;
    for (int64_t id = 0; id < 27; ++id) {
      const int64_t g0 = id / 9, g1 = id / 3 % 3, g2 = id % 3;
      if (std::find(missing.begin(), missing.end(), id) != missing.end()) {
        table.chunks.push_back({-1, 0, 0});
        for (int64_t i = 0; i < 5 * 7 * 9; ++i) {
          const int64_t a = i / 63, b = i / 9 % 7, c = i % 9;
          if (a / 2 == g0 && b / 3 == g1 && c / 4 == g2) expected[static_cast<size_t>(i)] = fill;
        }
        continue;
      }
      std::vector<float> values(24, -99.f);  // the part outside the shape is junk
      for (int64_t a = 0; a < 2; ++a)
        for (int64_t b = 0; b < 3; ++b)
          for (int64_t c = 0; c < 4; ++c) {
            const int64_t x = g0 * 2 + a, y = g1 * 3 + b, z = g2 * 4 + c;
            if (x < 5 && y < 7 && z < 9)
              values[static_cast<size_t>((a * 3 + b) * 4 + c)] =
                  static_cast<float>((x * 7 + y) * 9 + z);
          }
      std::vector<std::byte> stored = encode({{CodecKind::kZstd, 1}}, as_bytes(values), chunk, 4);
      table.chunks.push_back(
          {0, static_cast<int64_t>(bytes.size()), static_cast<int64_t>(stored.size())});
      const auto* p = reinterpret_cast<const char*>(stored.data());
      bytes.insert(bytes.end(), p, p + stored.size());
    }
    test::write_file_bytes(file, bytes);
  }
};

TEST(Chunked, OddRangesMapOntoTheGrid) {
  ScratchDir scratch;
  TempDir dir;
  test::BudgetGuard budget(1 << 20);
  ChunkedFixture fx(dir.file("a.bin"), {4, 13, 26}, -1.f);
  ArrayRef a = StoredArray::open_chunked(fx.table);
  const std::vector<std::pair<int64_t, int64_t>> ranges = {
      {0, 315}, {0, 1}, {314, 1}, {3, 5}, {8, 11}, {62, 66}, {100, 133}, {17, 200}};
  for (const auto& [first, count] : ranges) {
    std::vector<float> got(static_cast<size_t>(count));
    a->read_elems(got.data(), first, count);
    for (int64_t i = 0; i < count; ++i)
      ASSERT_EQ(got[static_cast<size_t>(i)], fx.expected[static_cast<size_t>(first + i)])
          << "range " << first << "+" << count << " at " << i;
  }
  // A view and a reshape read through the same source.
  ArrayRef v = StoredArray::viewed(StoredArray::reshaped(a, {35, 9}), 40, {3, 9});
  std::vector<float> got(27);
  v->read_elems(got.data(), 0, 27);
  for (int64_t i = 0; i < 27; ++i)
    EXPECT_EQ(got[static_cast<size_t>(i)], fx.expected[static_cast<size_t>(40 + i)]);
  EXPECT_THROW(a->write_elems(got.data(), 0, 1), ReadOnlyError);
}

TEST(Chunked, SequentialStreamDecodesEachChunkOnce) {
  ScratchDir scratch;
  TempDir dir;
  test::BudgetGuard budget(1 << 20);
  ChunkedFixture fx(dir.file("a.bin"), {5}, 0.f);
  ArrayRef a = StoredArray::open_chunked(fx.table);
  {
    ChunkReservation reservation({a});
    EXPECT_GT(reserved_budget(), 0);
    std::vector<float> got(315);
    for (int64_t first = 0; first < 315; first += 37)  // blocks not aligned with chunk rows
      a->read_elems(got.data() + first, first, std::min<int64_t>(37, 315 - first));
    for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], fx.expected[i]);
  }
  EXPECT_EQ(reserved_budget(), 0);
  EXPECT_EQ(a->chunked()->chunks_decoded(), 26);  // every stored chunk once
}

TEST(Chunked, CorruptChunkNamesTheArrayAndChunk) {
  ScratchDir scratch;
  TempDir dir;
  ChunkedFixture fx(dir.file("a.bin"), {}, 0.f);
  std::vector<char> bytes = test::read_file_bytes(dir.file("a.bin"));
  const ChunkLocation c = fx.table.chunks[7];  // grid index (0, 2, 1)
  for (int64_t i = 4; i < c.nbytes; ++i) bytes[static_cast<size_t>(c.offset + i)] ^= 0x5A;
  test::write_file_bytes(dir.file("a.bin"), bytes);
  ArrayRef a = StoredArray::open_chunked(fx.table);
  std::vector<float> got(315);
  try {
    a->read_elems(got.data(), 0, 315);
    FAIL() << "a corrupt chunk read without error";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("a.bin (a), chunk (0, 2, 1)"), std::string::npos)
        << e.what();
  }
  // A chunk past the end of its file.
  fx.table.chunks[3].nbytes = 1 << 20;
  ArrayRef b = StoredArray::open_chunked(fx.table);
  EXPECT_THROW(b->read_elems(got.data(), 0, 315), ValueError);
}

TEST(Chunked, TooSmallABudgetIsAMemoryError) {
  ScratchDir scratch;
  TempDir dir;
  ChunkedFixture fx(dir.file("a.bin"), {}, 0.f);
  fx.table.chunk_shape = {5, 7, 9};  // one chunk of 1260 bytes: its workspace needs pages
  fx.table.chunks.resize(1);
  ArrayRef a = StoredArray::open_chunked(fx.table);
  test::BudgetGuard budget(4096);
  try {
    ChunkReservation reservation({a});
    FAIL() << "no MemoryError";
  } catch (const MemoryError& e) {
    EXPECT_GT(test::needed_budget_in(e.what()), 4096) << e.what();
  }
  EXPECT_EQ(reserved_budget(), 0);
}

TEST(Chunked, DeflatedMemberStreamsForwardAndRestartsBehind) {
  ScratchDir scratch;
  TempDir dir;
  // A member of 64 Ki float32 (256 KiB) behind a 16-byte header, raw deflate.
  std::vector<float> values(1 << 16);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i % 1000) - 7.f;
  std::vector<std::byte> member(16, std::byte{0x42});
  const std::vector<std::byte> data = as_bytes(values);
  member.insert(member.end(), data.begin(), data.end());
  const std::vector<std::byte> stored = encode({{CodecKind::kDeflate, 6}}, member, {}, 4);
  std::vector<char> bytes(stored.size());
  std::memcpy(bytes.data(), stored.data(), stored.size());
  test::write_file_bytes(dir.file("m"), bytes);
  ChunkTable t;
  t.path = dir.file("m");
  t.name = "a.npy";
  t.info = ArrayInfo{DType::f32, {1 << 14, 4}};
  t.chunk_shape = t.info.shape;
  t.codecs = {{CodecKind::kDeflate, 0}, {CodecKind::kSkip, 16}};
  t.files = {dir.file("m")};
  t.chunks = {{0, 0, -1}};
  t.fill.resize(4);
  ArrayRef a = StoredArray::open_chunked(t);
  test::BudgetGuard budget(64 << 10);  // the member is 4x the budget: streamed
  reset_peak_buffer_bytes();
  const int64_t base = buffer_bytes();
  ChunkReservation reservation({a});
  EXPECT_LE(reserved_budget(), 32 << 10);
  std::vector<float> got(5000);
  for (int64_t first : {int64_t{0}, int64_t{5000}, int64_t{30001}, int64_t{12}, int64_t{60000}}) {
    const int64_t count = std::min<int64_t>(5000, (1 << 16) - first);
    a->read_elems(got.data(), first, count);
    for (int64_t i = 0; i < count; ++i)
      ASSERT_EQ(got[static_cast<size_t>(i)], values[static_cast<size_t>(first + i)]) << first;
  }
  EXPECT_LE(peak_buffer_bytes() - base, 32 << 10);  // never the whole member
}

// A float32 array of `shape` in uncompressed chunks of `chunk`, one file per
// stored chunk (each holding `bytes` bytes of float 7), sparse table.
ChunkTable raw_table(const TempDir& dir, std::vector<int64_t> shape, std::vector<int64_t> chunk,
                     const std::vector<int64_t>& ids, size_t bytes) {
  ChunkTable t;
  t.path = dir.file("zarr.json");
  test::write_file_bytes(t.path, std::vector<char>{'{', '}'});  // the file table opens it
  t.info = ArrayInfo{DType::f32, std::move(shape)};
  t.chunk_shape = std::move(chunk);
  t.sparse = true;
  t.fill.resize(4);
  for (int64_t id : ids) {
    const std::string file = dir.file(std::to_string(id));
    std::vector<float> sevens((bytes + 3) / 4, 7.f);
    std::vector<char> data(bytes);
    std::memcpy(data.data(), sevens.data(), bytes);
    test::write_file_bytes(file, data);
    t.ids.push_back(id);
    t.chunks.push_back({static_cast<int64_t>(t.files.size()), 0, -1});
    t.files.push_back(file);
  }
  return t;
}

TEST(Chunked, SparseTableOverAGridOf2To40Chunks) {
  ScratchDir scratch;
  TempDir dir;
  test::BudgetGuard budget(1 << 20);
  const int64_t side = int64_t{1} << 20;
  ArrayRef a = StoredArray::open_chunked(raw_table(dir, {side, side}, {1, 1}, {5 * side + 11}, 4));
  std::vector<float> got(4);
  a->read_elems(got.data(), 5 * side + 9, 4);  // (5, 9) .. (5, 12): one stored chunk
  EXPECT_EQ(got, (std::vector<float>{0.f, 0.f, 7.f, 0.f}));
}

TEST(Chunked, TableRowsOutOfRangeAreRefused) {
  TempDir dir;
  ChunkTable t = raw_table(dir, {8}, {2}, {1, 3}, 8);
  t.ids = {3, 1};  // not ascending
  EXPECT_THROW(ChunkedSource{t}, ValueError);
  t.ids = {1, 4};  // past the grid of 4 chunks
  EXPECT_THROW(ChunkedSource{t}, ValueError);
  t.ids = {1, 3};
  t.chunks[0] = {0, int64_t{1} << 62, int64_t{3} << 61};  // offset + nbytes wraps
  EXPECT_THROW(ChunkedSource{t}, ValueError);
}

TEST(Chunked, ChunkBytesThatWrapInt64AreRefused) {
  TempDir dir;
  // (2**62 + 1) * 3 float32 is 12 bytes after wrapping: a heap read if unchecked.
  ChunkTable t = raw_table(dir, {2, 3}, {(int64_t{1} << 62) + 1, 3}, {0}, 12);
  try {
    ChunkedSource source(t);
    FAIL() << "a wrapped chunk size was accepted";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("zarr.json"), std::string::npos) << e.what();
  }
  t = raw_table(dir, {3}, {int64_t{1} << 61}, {0}, 12);  // 2**63 bytes: past int64
  EXPECT_THROW(ChunkedSource{t}, ValueError);
}

TEST(Chunked, UncompressedChunkOfTheWrongLengthIsRefused) {
  ScratchDir scratch;
  TempDir dir;
  test::BudgetGuard budget(1 << 20);
  std::vector<float> got(5);
  for (size_t bytes : {size_t{4}, size_t{12}}) {  // a (2,) float32 chunk is exactly 8 bytes
    ArrayRef a = StoredArray::open_chunked(raw_table(dir, {5}, {2}, {0, 1, 2}, 8));
    a->read_elems(got.data(), 0, 5);
    EXPECT_EQ(got, std::vector<float>(5, 7.f));
    // The edge chunk (2,) holds one element of the array but is stored whole.
    ChunkTable t = raw_table(dir, {5}, {2}, {0, 1, 2}, 8);
    std::vector<char> data(bytes, 0);
    test::write_file_bytes(t.files[2], data);
    ArrayRef b = StoredArray::open_chunked(t);
    try {
      b->read_elems(got.data(), 0, 5);
      FAIL() << bytes << " bytes were read as a chunk of 8";
    } catch (const ValueError& e) {
      EXPECT_NE(std::string(e.what()).find("exactly 8"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace jask
