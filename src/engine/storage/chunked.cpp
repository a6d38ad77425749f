#include "storage/chunked.hpp"

#include <algorithm>
#include <cstring>
#include <span>
#include <unordered_map>

#include "base/concurrency.hpp"
#include "base/errors.hpp"
#include "base/memory_budget.hpp"
#include "storage/array_store.hpp"
#include "storage/file_table.hpp"
#include "storage/hyperslab.hpp"
#include "storage/io_config.hpp"

namespace jask {
namespace {

constexpr size_t kPage = 4096;
// Chunk files kept open at once; beyond this the oldest are closed (a Zarr v2
// array may have a file per chunk).
constexpr size_t kOpenFilesKept = 256;
// Compressed bytes read per step of a streamed (npz) member, at most.
constexpr int64_t kStreamPiece = 1 << 20;

// A chunk's decoded bytes at most: its workspace sizes (a few chunks, page
// rounded) then stay far from int64's end.
constexpr int64_t kMaxChunkBytes = int64_t{1} << 60;

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

// The product of sizes whose whole product was checked to fit int64 (so a
// zero anywhere makes it 0 before a partial product can wrap).
int64_t product(const std::vector<int64_t>& v, size_t from = 0) {
  if (std::find(v.begin() + static_cast<std::ptrdiff_t>(from), v.end(), 0) != v.end()) return 0;
  int64_t n = 1;
  for (size_t i = from; i < v.size(); ++i) n *= v[i];
  return n;
}

int64_t checked_mul(int64_t a, int64_t b, const std::string& what) {
  int64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out))
    throw ValueError(what + ": " + std::to_string(a) + " * " + std::to_string(b) +
                     " overflows a 64-bit size");
  return out;
}

int64_t checked_add(int64_t a, int64_t b, const std::string& what) {
  int64_t out = 0;
  if (__builtin_add_overflow(a, b, &out))
    throw ValueError(what + ": " + std::to_string(a) + " + " + std::to_string(b) +
                     " overflows a 64-bit size");
  return out;
}

int64_t checked_product(const std::vector<int64_t>& v, const std::string& what) {
  if (std::find(v.begin(), v.end(), 0) != v.end()) return 0;
  int64_t n = 1;
  for (int64_t d : v) {
    if (__builtin_mul_overflow(n, d, &n))
      throw ValueError(what + " " + shape_repr(v) + " has more elements than a 64-bit size holds");
  }
  return n;
}

// C-order strides (elements) of `shape`.
std::vector<int64_t> strides_of(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size());
  int64_t at = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    s[d] = at;
    at *= shape[d];
  }
  return s;
}

// Copies the block `extent` at `src_start` of a C-order `src` of `src_shape`
// to the origin of a C-order `dst` of `dst_shape`.
void copy_block(const std::byte* src, const std::vector<int64_t>& src_shape,
                const std::vector<int64_t>& src_start, std::byte* dst,
                const std::vector<int64_t>& dst_shape, const std::vector<int64_t>& extent,
                size_t isz) {
  const size_t nd = extent.size();
  if (nd == 0) {
    std::memcpy(dst, src, isz);
    return;
  }
  for (int64_t e : extent)
    if (e == 0) return;
  const std::vector<int64_t> ss = strides_of(src_shape), ds = strides_of(dst_shape);
  std::vector<int64_t> idx(nd - 1, 0);
  const size_t run = static_cast<size_t>(extent[nd - 1]) * isz;
  while (true) {
    int64_t s = src_start[nd - 1], d = 0;
    for (size_t k = 0; k + 1 < nd; ++k) {
      s += (src_start[k] + idx[k]) * ss[k];
      d += idx[k] * ds[k];
    }
    std::memcpy(dst + d * static_cast<int64_t>(isz), src + s * static_cast<int64_t>(isz), run);
    size_t k = nd - 1;
    for (; k-- > 0;) {
      if (++idx[k] < extent[k]) break;
      idx[k] = 0;
    }
    if (k == static_cast<size_t>(-1)) return;
  }
}

void fill_elements(std::byte* dst, int64_t count, const std::vector<std::byte>& fill) {
  const size_t isz = fill.size();
  if (std::all_of(fill.begin(), fill.end(), [](std::byte b) { return b == std::byte{0}; })) {
    std::memset(dst, 0, static_cast<size_t>(count) * isz);
    return;
  }
  for (int64_t i = 0; i < count; ++i)
    std::memcpy(dst + i * static_cast<int64_t>(isz), fill.data(), isz);
}

// Calls fn(chunk id, element offset in the chunk, run length, offset in the
// range) for the pieces of C-order elements [first, first + count) that are
// contiguous in one chunk: runs along the last axis, cut at chunk edges.
template <class Fn>
void for_each_chunk_run(const std::vector<int64_t>& shape, const std::vector<int64_t>& chunk,
                        const std::vector<int64_t>& grid, int64_t first, int64_t count, Fn fn) {
  const size_t nd = shape.size();
  if (count <= 0) return;
  if (nd == 0) return fn(int64_t{0}, int64_t{0}, int64_t{1}, int64_t{0});
  const std::vector<int64_t> gs = strides_of(grid), cs = strides_of(chunk);
  std::vector<int64_t> idx(nd);
  int64_t rest = first;
  for (size_t d = nd; d-- > 0;) {
    idx[d] = rest % shape[d];
    rest /= shape[d];
  }
  for (int64_t done = 0; done < count;) {
    const int64_t last = idx[nd - 1], c = chunk[nd - 1];
    const int64_t run = std::min({count - done, shape[nd - 1] - last, c - last % c});
    int64_t id = 0, within = 0;
    for (size_t d = 0; d < nd; ++d) {
      id += idx[d] / chunk[d] * gs[d];
      within += idx[d] % chunk[d] * cs[d];
    }
    fn(id, within, run, done);
    done += run;
    idx[nd - 1] += run;
    for (size_t d = nd - 1; d > 0 && idx[d] == shape[d]; --d) {
      idx[d] = 0;
      ++idx[d - 1];
    }
  }
}

}  // namespace

// The decoded chunks of the running call, and the workspace decoding them.
struct ChunkedSource::Cache {
  // One buffer: the stored chunk being decoded (page-aligned, first), then
  // slots_ slots of decoded_cap_ bytes; or, streaming, the compressed piece
  // being inflated and the piece discarded while seeking.
  AlignedBuffer memory;
  std::span<std::byte> stored, discard;
  std::byte* slots = nullptr;
  AlignedBuffer overflow;           // a stored chunk larger than stored_cap_
  std::vector<int64_t> slot_chunk;  // the chunk in each slot, -1: empty
  std::vector<size_t> slot_data;    // where its data starts in the slot
  std::vector<uint64_t> slot_used;  // last use (LRU)
  std::unordered_map<int64_t, int64_t> slot_of;
  uint64_t clock = 0;
  // Streaming: the inflate state, its position in the decoded stream, and
  // the compressed bytes consumed.
  std::unique_ptr<InflateStream> stream;
  int64_t stream_pos = 0, stream_in = 0;
};

ChunkedSource::ChunkedSource(ChunkTable table) : table_(std::move(table)) {
  const ArrayInfo& info = table_.info;
  const size_t nd = info.shape.size();
  const std::string what = describe();
  if (table_.chunk_shape.size() != nd) {
    throw ValueError(what + ": chunk shape " + shape_repr(table_.chunk_shape) +
                     " has a different number of axes than the shape " + shape_repr(info.shape));
  }
  for (size_t d = 0; d < nd; ++d) {
    if (table_.chunk_shape[d] <= 0 || info.shape[d] < 0)
      throw ValueError(what + ": bad chunk shape " + shape_repr(table_.chunk_shape) +
                       " for shape " + shape_repr(info.shape));
    const int64_t s = info.shape[d], c = table_.chunk_shape[d];
    grid_.push_back(s / c + (s % c != 0));
  }
  const size_t isz = itemsize(info.dtype);
  int64_t skipped = 0;
  raw_ = true;
  for (const CodecStep& s : table_.codecs) {
    if (s.kind == CodecKind::kSkip) skipped = checked_add(skipped, s.param, what);
    if (s.kind != CodecKind::kByteswap) raw_ = false;
  }
  // Every size below derives from these: checked, so a hostile chunk shape
  // cannot wrap around to a small one.
  chunk_numel_ = checked_product(table_.chunk_shape, what + ": the chunk shape");
  chunk_bytes_ = checked_mul(chunk_numel_, static_cast<int64_t>(isz), what);
  if (checked_add(chunk_bytes_, skipped, what) > kMaxChunkBytes) {
    throw ValueError(what + ": a chunk of " + shape_repr(table_.chunk_shape) + " " +
                     dtype_name(info.dtype) + " is " + std::to_string(chunk_bytes_) +
                     " bytes, more than the " + std::to_string(kMaxChunkBytes) +
                     " a chunk may hold");
  }
  const int64_t n_chunks = checked_product(grid_, what + ": the chunk grid");
  check_rows(n_chunks);
  if (table_.fill.size() != isz) throw ValueError(what + ": the fill value is not one element");
  decoded_cap_ = round_up(static_cast<size_t>(chunk_bytes_ + skipped) + 8, 64);
  int64_t largest = 0;
  for (const ChunkLocation& c : table_.chunks) largest = std::max(largest, c.nbytes);
  stored_cap_ = round_up(std::max(decoded_cap_ + 64, static_cast<size_t>(largest)), 64);
  // The largest stored chunk any encoder writes, with room for what other
  // writers add (headers, padding); past it a chunk is refused unread.
  size_t bound = static_cast<size_t>(chunk_bytes_ + skipped);
  for (auto s = table_.codecs.rbegin(); s != table_.codecs.rend(); ++s)
    bound = std::max(bound, encode_bound(*s, bound));
  stored_limit_ = static_cast<int64_t>(std::min<size_t>(bound, kMaxChunkBytes)) * 2 + (64 << 10);
  bool rest_whole = true;  // every axis but the first whole in the chunk: C order agrees
  for (size_t d = 1; d < nd; ++d) rest_whole = rest_whole && table_.chunk_shape[d] == info.shape[d];
  streamable_ = n_chunks == 1 && rest_whole && !table_.codecs.empty() &&
                is_stream_codec(table_.codecs[0].kind) &&
                std::all_of(table_.codecs.begin() + 1, table_.codecs.end(), [](const CodecStep& s) {
                  return s.kind == CodecKind::kSkip || s.kind == CodecKind::kByteswap;
                });
  open_files_.resize(table_.files.size());
  file_sizes_.resize(table_.files.size());
}

void ChunkedSource::check_rows(int64_t n_chunks) const {
  const std::string what = describe();
  if (table_.sparse ? table_.ids.size() != table_.chunks.size()
                    : static_cast<int64_t>(table_.chunks.size()) != n_chunks) {
    throw ValueError(
        what + ": the chunk table has " + std::to_string(table_.chunks.size()) + " rows" +
        (table_.sparse
             ? " and " + std::to_string(table_.ids.size()) + " chunk ids"
             : "; a grid of " + shape_repr(grid_) + " chunks needs " + std::to_string(n_chunks)));
  }
  for (size_t i = 0; i < table_.chunks.size(); ++i) {
    const ChunkLocation& c = table_.chunks[i];
    int64_t end = 0;
    const bool sparse_ok = !table_.sparse || (table_.ids[i] >= 0 && table_.ids[i] < n_chunks &&
                                              (i == 0 || table_.ids[i] > table_.ids[i - 1]));
    if (!sparse_ok || c.file < -1 || c.file >= static_cast<int64_t>(table_.files.size()) ||
        c.offset < 0 || c.nbytes < -1 || __builtin_add_overflow(c.offset, c.nbytes, &end)) {
      throw ValueError(what + ": chunk table row " + std::to_string(i) + " (" +
                       (table_.sparse ? "chunk " + std::to_string(table_.ids[i]) + ", " : "") +
                       std::to_string(c.file) + ", " + std::to_string(c.offset) + ", " +
                       std::to_string(c.nbytes) + ") is out of range (" +
                       std::to_string(table_.files.size()) + " files, " + std::to_string(n_chunks) +
                       " chunks" + (table_.sparse ? ", ids ascending" : "") + ")");
    }
  }
}

const ChunkLocation* ChunkedSource::location(int64_t id) const {
  const ChunkLocation* c = nullptr;
  if (!table_.sparse) {
    c = &table_.chunks[static_cast<size_t>(id)];
  } else {
    const auto it = std::lower_bound(table_.ids.begin(), table_.ids.end(), id);
    if (it == table_.ids.end() || *it != id) return nullptr;
    c = &table_.chunks[static_cast<size_t>(it - table_.ids.begin())];
  }
  return c->file < 0 ? nullptr : c;
}

ChunkedSource::~ChunkedSource() = default;

std::string ChunkedSource::describe() const {
  return table_.name.empty() ? table_.path : table_.path + " (" + table_.name + ")";
}

std::string ChunkedSource::chunk_what(int64_t id) const {
  std::vector<int64_t> idx(grid_.size());
  for (size_t d = grid_.size(); d-- > 0;) {
    idx[d] = id % grid_[d];
    id /= grid_[d];
  }
  return describe() + ", chunk " + shape_repr(idx);
}

int64_t ChunkedSource::chunks_decoded() const {
  std::lock_guard<std::mutex> lock(mu_);
  return decoded_;
}

const File& ChunkedSource::file(int64_t index) const {
  std::unique_ptr<File>& f = open_files_[static_cast<size_t>(index)];
  if (f == nullptr) {
    size_t open = 0;
    for (const auto& o : open_files_) open += o != nullptr;
    if (open >= kOpenFilesKept)
      for (auto& o : open_files_) o.reset();
    f = std::make_unique<File>(table_.files[static_cast<size_t>(index)], OpenMode::kReadOnly);
    file_sizes_[static_cast<size_t>(index)] = f->size();
  }
  return *f;
}

int64_t ChunkedSource::stored_size(int64_t id, const ChunkLocation& c) const {
  file(c.file);
  const uint64_t size = file_sizes_[static_cast<size_t>(c.file)];
  const int64_t stored = c.nbytes >= 0 ? c.nbytes : static_cast<int64_t>(size) - c.offset;
  // c.offset + c.nbytes does not wrap (checked when the table was read).
  if (stored < 0 || static_cast<uint64_t>(c.offset + stored) > size) {
    throw ValueError(chunk_what(id) + ": the chunk at offset " + std::to_string(c.offset) + " (" +
                     std::to_string(c.nbytes) + " bytes) of " +
                     table_.files[static_cast<size_t>(c.file)] + " runs past its end (" +
                     std::to_string(size) + " bytes)");
  }
  // An uncompressed chunk holds exactly its elements, edge chunks too (Zarr
  // and HDF5 store them whole): more or fewer bytes would shift the values.
  if (raw_ && stored != chunk_bytes_) {
    throw ValueError(chunk_what(id) + ": the uncompressed chunk in " +
                     table_.files[static_cast<size_t>(c.file)] + " holds " +
                     std::to_string(stored) + " bytes; a chunk of " +
                     shape_repr(table_.chunk_shape) + " " + dtype_name(table_.info.dtype) +
                     " is exactly " + std::to_string(chunk_bytes_));
  }
  return stored;
}

uint64_t ChunkedSource::stored_offset(int64_t id, const ChunkLocation& c, int64_t at,
                                      int64_t bytes) const {
  const int64_t stored = stored_size(id, c);
  if (at < 0 || bytes < 0 || at > stored || bytes > stored - at) {
    throw ValueError(chunk_what(id) + ": the chunk at offset " + std::to_string(c.offset) + " of " +
                     table_.files[static_cast<size_t>(c.file)] + " holds " +
                     std::to_string(stored) + " bytes, fewer than the " +
                     std::to_string(at + bytes) + " read");
  }
  return static_cast<uint64_t>(c.offset + at);
}

void ChunkedSource::read_stored(int64_t id, const ChunkLocation& c, std::byte* dst, int64_t at,
                                int64_t bytes) const {
  const uint64_t offset = stored_offset(id, c, at, bytes);
  file(c.file).read_at(dst, static_cast<size_t>(bytes), offset, io_policy());
}

const std::byte* ChunkedSource::decoded_chunk(int64_t id, const ChunkLocation& c) const {
  Cache& cache = *cache_;
  if (auto it = cache.slot_of.find(id); it != cache.slot_of.end()) {
    cache.slot_used[static_cast<size_t>(it->second)] = ++cache.clock;
    return cache.slots + it->second * static_cast<int64_t>(decoded_cap_) +
           cache.slot_data[static_cast<size_t>(it->second)];
  }
  if (cache.slots == nullptr) {
    cache.memory = AlignedBuffer(stored_cap_ + static_cast<size_t>(slots_) * decoded_cap_);
    cache.stored = {cache.memory.data(), stored_cap_};
    cache.slots = cache.memory.data() + stored_cap_;
    cache.slot_chunk.assign(static_cast<size_t>(slots_), -1);
    cache.slot_data.assign(static_cast<size_t>(slots_), 0);
    cache.slot_used.assign(static_cast<size_t>(slots_), 0);
  }
  const size_t slot = static_cast<size_t>(
      std::min_element(cache.slot_used.begin(), cache.slot_used.end()) - cache.slot_used.begin());
  if (cache.slot_chunk[slot] >= 0) cache.slot_of.erase(cache.slot_chunk[slot]);
  cache.slot_chunk[slot] = -1;

  const int64_t stored = stored_size(id, c);
  std::span<std::byte> in = cache.stored;
  if (stored > static_cast<int64_t>(in.size())) {  // larger than the table said: rare
    if (stored > stored_limit_) {
      throw ValueError(chunk_what(id) + ": the stored chunk is " + std::to_string(stored) +
                       " bytes, more than any encoding of its " + std::to_string(chunk_bytes_) +
                       " bytes takes (" + std::to_string(stored_limit_) + "): corrupt chunk");
    }
    cache.overflow = AlignedBuffer(static_cast<size_t>(stored));
    in = {cache.overflow.data(), cache.overflow.size()};
  }
  read_stored(id, c, in.data(), 0, stored);

  std::byte* slot_bytes = cache.slots + slot * decoded_cap_;
  const std::string what = chunk_what(id);
  const size_t isz = itemsize(table_.info.dtype);
  ChunkBytes cur{in.data(), static_cast<size_t>(stored)};
  for (const CodecStep& step : table_.codecs) {
    const bool in_stored = cur.data >= in.data() && cur.data < in.data() + in.size();
    std::byte* out = in_stored ? slot_bytes : in.data();
    const size_t cap = in_stored ? decoded_cap_ : in.size();
    cur = decode_step(step, cur, out, cap, table_.chunk_shape, isz, what);
  }
  const size_t chunk_bytes = static_cast<size_t>(chunk_bytes_);
  if (cur.size != chunk_bytes) {
    throw ValueError(what + ": decodes to " + std::to_string(cur.size) + " bytes, expected " +
                     std::to_string(chunk_bytes) + " (" + shape_repr(table_.chunk_shape) + " " +
                     dtype_name(table_.info.dtype) + ")");
  }
  if (cur.data < slot_bytes || cur.data >= slot_bytes + decoded_cap_) {
    std::memmove(slot_bytes, cur.data, cur.size);
    cur.data = slot_bytes;
  }
  ++decoded_;
  cache.slot_chunk[slot] = id;
  cache.slot_data[slot] = static_cast<size_t>(cur.data - slot_bytes);
  cache.slot_used[slot] = ++cache.clock;
  cache.slot_of[id] = static_cast<int64_t>(slot);
  return cur.data;
}

void ChunkedSource::read_cached(void* dst, int64_t first, int64_t count) const {
  const int64_t isz = static_cast<int64_t>(itemsize(table_.info.dtype));
  auto* out = static_cast<std::byte*>(dst);
  // Raw chunks: runs that continue each other in the file (within a chunk,
  // or across chunks stored one after another) are one read.
  struct Pending {
    int64_t file = -1, bytes = 0, at = 0;
    uint64_t offset = 0;
  } raw;
  auto read_raw = [&] {
    if (raw.bytes == 0) return;
    std::byte* to = out + raw.at;
    file(raw.file).read_at(to, static_cast<size_t>(raw.bytes), raw.offset, io_policy());
    for (const CodecStep& s : table_.codecs)
      decode_step(s, {to, static_cast<size_t>(raw.bytes)}, nullptr, 0, table_.chunk_shape,
                  static_cast<size_t>(isz), describe());
    raw.bytes = 0;
  };
  for_each_chunk_run(table_.info.shape, table_.chunk_shape, grid_, first, count,
                     [&](int64_t id, int64_t within, int64_t run, int64_t at) {
                       std::byte* to = out + at * isz;
                       const ChunkLocation* c = location(id);
                       if (c == nullptr) {
                         fill_elements(to, run, table_.fill);
                       } else if (raw_) {
                         const uint64_t offset = stored_offset(id, *c, within * isz, run * isz);
                         if (raw.bytes > 0 && raw.file == c->file &&
                             raw.offset + raw.bytes == offset && raw.at + raw.bytes == at * isz) {
                           raw.bytes += run * isz;
                           return;
                         }
                         read_raw();
                         raw = Pending{c->file, run * isz, at * isz, offset};
                       } else {
                         std::memcpy(to, decoded_chunk(id, *c) + within * isz,
                                     static_cast<size_t>(run * isz));
                       }
                     });
  read_raw();
}

void ChunkedSource::read_streaming(void* dst, int64_t first, int64_t count) const {
  Cache& cache = *cache_;
  const size_t isz = itemsize(table_.info.dtype);
  const std::string what = chunk_what(0);
  const ChunkLocation* c = location(0);
  if (c == nullptr) {
    fill_elements(static_cast<std::byte*>(dst), count, table_.fill);
    return;
  }
  int64_t skipped = 0;
  for (const CodecStep& s : table_.codecs)
    if (s.kind == CodecKind::kSkip) skipped += s.param;
  const int64_t stored = stored_size(0, *c);
  if (cache.stream == nullptr) {
    cache.stream = std::make_unique<InflateStream>(table_.codecs[0].kind);
    cache.stream_pos = cache.stream_in = 0;
  }
  const int64_t target = skipped + first * static_cast<int64_t>(isz);
  if (target < cache.stream_pos) {  // behind the stream: start over
    cache.stream->reset();
    cache.stream_pos = cache.stream_in = 0;
  }
  // Inflates `n` bytes into `to` (null: discarded into the workspace).
  auto inflate_into = [&](std::byte* to, int64_t n) {
    while (n > 0) {
      if (cache.stream->more_input()) {
        const int64_t piece = std::min<int64_t>(cache.stored.size(), stored - cache.stream_in);
        if (piece <= 0) throw ValueError(what + ": corrupt chunk: the deflate stream is truncated");
        read_stored(0, *c, cache.stored.data(), cache.stream_in, piece);
        cache.stream_in += piece;
        cache.stream->feed(cache.stored.data(), static_cast<size_t>(piece));
      }
      std::byte* into = to != nullptr ? to : cache.discard.data();
      const size_t ask = static_cast<size_t>(
          to != nullptr ? n : std::min<int64_t>(n, static_cast<int64_t>(cache.discard.size())));
      const size_t got = cache.stream->inflate(into, ask, what);
      if (got == 0 && cache.stream->finished())
        throw ValueError(what + ": corrupt chunk: the stream ends " + std::to_string(n) +
                         " bytes early");
      cache.stream_pos += static_cast<int64_t>(got);
      n -= static_cast<int64_t>(got);
      if (to != nullptr) to += got;
    }
  };
  inflate_into(nullptr, target - cache.stream_pos);
  auto* out = static_cast<std::byte*>(dst);
  inflate_into(out, count * static_cast<int64_t>(isz));
  for (const CodecStep& s : table_.codecs)
    if (s.kind == CodecKind::kByteswap)
      decode_step(s, {out, static_cast<size_t>(count) * isz}, nullptr, 0, table_.chunk_shape, isz,
                  what);
}

void ChunkedSource::read(void* dst, int64_t first, int64_t count) const {
  if (first < 0 || count < 0 || first + count > table_.info.numel()) {
    throw ValueError(describe() + ": elements [" + std::to_string(first) + ", " +
                     std::to_string(first + count) + ") are outside " + table_.info.describe());
  }
  std::lock_guard<std::mutex> lock(mu_);
  const bool outside_call = calls_ == 0;
  if (outside_call) {  // a read no call planned for: the smallest cache, dropped after it
    slots_ = 1;
    stream_mode_ = streamable_ && static_cast<int64_t>(decoded_cap_) > memory_budget() / 4;
  }
  if (cache_ == nullptr) {
    cache_ = std::make_unique<Cache>();
    if (stream_mode_) {
      const size_t piece = static_cast<size_t>(
          std::clamp<int64_t>(memory_budget() / 8 / 4096 * 4096, 4096, kStreamPiece));
      cache_->memory = AlignedBuffer(2 * piece);
      cache_->stored = {cache_->memory.data(), piece};
      cache_->discard = {cache_->memory.data() + piece, piece};
    }
  }
  try {
    if (stream_mode_)
      read_streaming(dst, first, count);
    else
      read_cached(dst, first, count);
  } catch (...) {
    if (outside_call) drop();
    throw;
  }
  if (outside_call) drop();
}

void ChunkedSource::drop() const { cache_.reset(); }

int64_t ChunkedSource::begin_call() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (calls_++ > 0) return 0;
  const int64_t avail = memory_budget();
  const int64_t dec = static_cast<int64_t>(decoded_cap_);
  // The least the cache can hold: one decoded chunk and one stored chunk.
  const int64_t least = static_cast<int64_t>(round_up(decoded_cap_ + stored_cap_, kPage));
  stream_mode_ = streamable_ && (dec > avail / 4 || least > avail / 2);
  int64_t need = 0;
  if (stream_mode_) {
    const int64_t page = static_cast<int64_t>(kPage);
    const int64_t piece = std::clamp<int64_t>(avail / 8 / page * page, page, kStreamPiece);
    need = 2 * piece;
  } else if (!raw_) {
    const int64_t band = grid_.empty() ? 1 : product(grid_, 1);
    // Two bands: a block straddling two bands, read by two operands of the
    // same array (x * x), finds the first operand's chunks still cached.
    const int64_t stored = static_cast<int64_t>(stored_cap_);
    slots_ = std::max<int64_t>(1, std::min(2 * band * dec, avail / 4 - stored) / dec);
    auto bytes = [&] {
      return static_cast<int64_t>(round_up(static_cast<size_t>(slots_ * dec + stored), kPage));
    };
    need = bytes();
    if (need > avail / 2 && slots_ > 1) {  // page rounding tipped it over: fewer slots
      const int64_t page = static_cast<int64_t>(kPage);  // signed: the room may be negative
      slots_ = std::max<int64_t>(1, (avail / 2 / page * page - stored) / dec);
      need = bytes();
    }
  }
  if (need > avail / 2) {
    --calls_;
    // Of this budget a quarter holds `least` and a page of rounding: the cache fits in half.
    const int64_t works = total_memory_budget() - avail + 4 * least + 4 * kPage;
    throw MemoryError(describe() + ": reading its chunks of " + shape_repr(table_.chunk_shape) +
                      " " + dtype_name(table_.info.dtype) + " (" + std::to_string(decoded_cap_) +
                      " bytes decoded, up to " + std::to_string(stored_cap_) + " stored) needs " +
                      std::to_string(need) + " bytes of the memory budget, " +
                      "more than half of the " + std::to_string(avail) + " left of " +
                      std::to_string(total_memory_budget()) + "; jask.set_memory_budget(" +
                      std::to_string(works) + ") works");
  }
  return need;
}

void ChunkedSource::end_call() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (--calls_ == 0) drop();
}

ChunkReservation::ChunkReservation(const std::vector<std::shared_ptr<StoredArray>>& arrays) {
  try {
    for (const auto& a : arrays) {
      if (a == nullptr || a->chunked() == nullptr) continue;
      const auto& s = a->chunked();
      if (std::find(sources_.begin(), sources_.end(), s) != sources_.end()) continue;
      const int64_t bytes = s->begin_call();
      sources_.push_back(s);
      reserve_budget(bytes);
      reserved_ += bytes;
    }
  } catch (...) {
    release();
    throw;
  }
}

ChunkReservation::ChunkReservation(const std::vector<int32_t>& handles)
    : ChunkReservation([&] {
        std::vector<std::shared_ptr<StoredArray>> arrays;
        for (int32_t h : handles) arrays.push_back(Registry::instance().find(h));
        return arrays;
      }()) {}

ChunkReservation::~ChunkReservation() { release(); }

void ChunkReservation::release() {
  for (const auto& s : sources_) s->end_call();
  sources_.clear();
  unreserve_budget(reserved_);
  reserved_ = 0;
}

// ---- The chunk writer

namespace {

std::vector<int64_t> unravel(int64_t id, const std::vector<int64_t>& grid) {
  std::vector<int64_t> idx(grid.size());
  for (size_t d = grid.size(); d-- > 0;) {
    idx[d] = id % grid[d];
    id /= grid[d];
  }
  return idx;
}

}  // namespace

std::vector<int64_t> write_chunked(const std::shared_ptr<StoredArray>& source,
                                   const std::vector<int64_t>& chunk_shape,
                                   const std::vector<CodecStep>& codecs,
                                   const std::vector<std::optional<std::string>>& paths) {
  const ArrayInfo& info = source->info();
  const std::vector<int64_t>& shape = info.shape;
  const size_t nd = shape.size(), isz = itemsize(info.dtype);
  const std::string what = "write_chunked(" + source->path() + ")";
  if (chunk_shape.size() != nd)
    throw ValueError(what + ": chunk shape " + shape_repr(chunk_shape) + " for shape " +
                     shape_repr(shape));
  std::vector<int64_t> grid;
  for (size_t d = 0; d < nd; ++d) {
    if (chunk_shape[d] <= 0)
      throw ValueError(what + ": bad chunk shape " + shape_repr(chunk_shape));
    grid.push_back((shape[d] + chunk_shape[d] - 1) / chunk_shape[d]);
  }
  const int64_t n_chunks = checked_product(grid, what + ": the chunk grid");
  if (checked_mul(checked_product(chunk_shape, what + ": the chunk shape"),
                  static_cast<int64_t>(isz), what) > kMaxChunkBytes)
    throw ValueError(what + ": a chunk of " + shape_repr(chunk_shape) + " is too large");
  if (static_cast<int64_t>(paths.size()) != n_chunks)
    throw ValueError(what + ": " + std::to_string(paths.size()) + " paths for a grid of " +
                     shape_repr(grid) + " (" + std::to_string(n_chunks) + " chunks)");
  for (const CodecStep& s : codecs)
    if (s.kind == CodecKind::kSkip) throw ValueError(what + ": the skip codec only decodes");

  BudgetTurn turn;
  ReadPins pins(files_of({source}));
  ChunkReservation reservation(std::vector<std::shared_ptr<StoredArray>>{source});

  const size_t chunk_bytes = static_cast<size_t>(product(chunk_shape)) * isz;
  size_t cap = chunk_bytes;
  for (const CodecStep& s : codecs) cap = std::max(cap, encode_bound(s, cap));
  const int64_t work = static_cast<int64_t>(2 * round_up(cap, kPage));
  const int64_t rows_per_band = nd == 0 ? 1 : chunk_shape[0];
  const int64_t row_numel = nd == 0 ? 1 : product(shape, 1);
  const int64_t band_bytes = rows_per_band * row_numel * static_cast<int64_t>(isz);
  const int64_t avail = memory_budget();
  const bool by_band = band_bytes + work <= avail;
  if (!by_band && work + static_cast<int64_t>(chunk_bytes) > avail) {
    throw MemoryError(
        what + ": a chunk of " + shape_repr(chunk_shape) + " " + dtype_name(info.dtype) +
        " and its encoding need " + std::to_string(work + static_cast<int64_t>(chunk_bytes)) +
        " bytes, more than the " + std::to_string(avail) +
        " left of the memory budget; jask.set_memory_budget(" +
        std::to_string(total_memory_budget() - avail + work + static_cast<int64_t>(chunk_bytes)) +
        ") works");
  }
  // Two workers cut, encode and write the chunks read (the encoders are the
  // slow part of to_zarr) when the budget holds a second workspace; as many
  // bands are read at once as the rest of the budget holds.
  const size_t workers = by_band && band_bytes + 2 * work <= avail ? 2 : 1;
  const int64_t bands = nd == 0 ? 1 : grid[0];
  const int64_t group =
      by_band ? std::clamp<int64_t>((avail - static_cast<int64_t>(workers) * work) / band_bytes, 1,
                                    bands)
              : 1;
  std::vector<AlignedBuffer> in_bufs, out_bufs;
  for (size_t w = 0; w < workers; ++w) {
    in_bufs.emplace_back(cap);
    out_bufs.emplace_back(cap);
  }
  AlignedBuffer staged(
      static_cast<size_t>(by_band ? group * band_bytes : static_cast<int64_t>(chunk_bytes)));
  std::vector<int64_t> sizes(static_cast<size_t>(n_chunks), 0);
  const int64_t per_band = nd == 0 ? 1 : product(grid, 1);
  const IoPolicy io = io_policy();
  // Chunk `id` from the staged rows [row0, ...) of shape `staged_shape`.
  auto write_chunk = [&](int64_t id, const std::vector<int64_t>& staged_shape, int64_t row0,
                         std::byte* a, std::byte* b) {
    const auto& path = paths[static_cast<size_t>(id)];
    if (!path) return;
    const std::vector<int64_t> idx = unravel(id, grid);
    std::vector<int64_t> start(nd), extent(nd);
    for (size_t d = 0; d < nd; ++d) {
      start[d] = idx[d] * chunk_shape[d];
      extent[d] = std::min(chunk_shape[d], shape[d] - start[d]);
    }
    std::memset(a, 0, chunk_bytes);
    if (by_band) {
      std::vector<int64_t> local = start;
      if (nd > 0) local[0] -= row0;
      copy_block(staged.data(), staged_shape, local, a, chunk_shape, extent, isz);
    } else {
      read_slab(*source, shape, Slab{start, extent}, staged.data());
      copy_block(staged.data(), extent, std::vector<int64_t>(nd, 0), a, chunk_shape, extent, isz);
    }
    std::byte* cur = a;
    std::byte* other = b;
    size_t n = chunk_bytes;
    for (const CodecStep& s : codecs) {
      n = encode_step(s, cur, n, other, cap, chunk_shape, isz, what);
      std::swap(cur, other);
    }
    File out(*path, OpenMode::kCreateTruncate);
    out.write_at(cur, n, 0, io);
    out.sync();
    sizes[static_cast<size_t>(id)] = static_cast<int64_t>(n);
  };
  for (int64_t band = 0; band < bands; band += group) {
    const int64_t n_bands = std::min(group, bands - band);
    const int64_t row0 = band * rows_per_band;
    std::vector<int64_t> staged_shape = shape;
    if (nd > 0) staged_shape[0] = std::min(n_bands * rows_per_band, shape[0] - row0);
    if (by_band) source->read_elems(staged.data(), row0 * row_numel, product(staged_shape));
    const int64_t n_ids = n_bands * per_band;
    run_concurrently(workers, [&](size_t w) {
      for (int64_t k = static_cast<int64_t>(w); k < n_ids; k += static_cast<int64_t>(workers))
        write_chunk(band * per_band + k, staged_shape, row0, in_bufs[w].data(), out_bufs[w].data());
    });
  }
  return sizes;
}

}  // namespace jask
