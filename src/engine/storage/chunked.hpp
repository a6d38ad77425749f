// Arrays whose elements live in encoded chunks (Zarr chunks and shards, HDF5
// chunked datasets, deflated .npz members): the chunk table, a read-only
// element source behind StoredArray (read_elems of any C-order range), and
// the chunk writer of to_zarr.
//
// Memory: every buffer is an AlignedBuffer, and an engine call that reads a
// chunked array first reserves the bytes its cache and decode workspace will
// hold (ChunkReservation, next to ReadPins): memory_budget() excludes them,
// so the planner plans blocks in what is left, and the cache goes at the
// call's end. The cache (LRU) holds two bands (a band: the chunks that share
// a first-axis chunk index) when a quarter of the budget holds them, else
// fewer chunks: a sequential stream then decodes each chunk once; smaller
// caches, and reads that jump about, decode chunks again. A one-chunk
// deflate member too large for the cache is inflated as a stream instead.
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "base/array_info.hpp"
#include "io/file.hpp"
#include "storage/codecs.hpp"

namespace jask {

class StoredArray;

// Where each chunk of the grid (C order) is stored.
struct ChunkLocation {
  int64_t file = -1;    // index into ChunkTable::files; -1: not stored (reads as fill)
  int64_t offset = 0;   // byte offset in the file
  int64_t nbytes = -1;  // stored bytes; -1: the rest of the file
};

struct ChunkTable {
  std::string path;  // the file that names the array (errors, the file table)
  std::string name;  // the array's name in it (a dataset, a member); may be empty
  ArrayInfo info;
  std::vector<int64_t> chunk_shape;
  std::vector<CodecStep> codecs;  // decoding order
  std::vector<std::string> files;
  // Dense (`ids` empty): one row per chunk of the grid, C order. Sparse: the
  // rows of the stored chunks only, chunks[i] holding grid chunk ids[i]
  // (ascending); every other chunk reads as fill, so a grid of 2**40 chunks
  // with a few stored costs a few rows.
  std::vector<ChunkLocation> chunks;
  bool sparse = false;
  std::vector<int64_t> ids;     // sparse only
  std::vector<std::byte> fill;  // one element
};

// The bytes of one array's chunks, decoded on demand. Thread-safe; reads of
// one source run one at a time (one cache, one decode workspace).
class ChunkedSource {
 public:
  explicit ChunkedSource(ChunkTable table);  // validates; ValueError naming path and name
  ~ChunkedSource();
  ChunkedSource(const ChunkedSource&) = delete;
  ChunkedSource& operator=(const ChunkedSource&) = delete;

  const ChunkTable& table() const { return table_; }
  // "path (name)", as errors name the array.
  std::string describe() const;
  // Elements [first, first + count) of the array in C order.
  void read(void* dst, int64_t first, int64_t count) const;

  // An engine call starts reading (calls nest): sizes the cache to the
  // budget left now and returns the bytes it reserves (0 when nested).
  // MemoryError when one chunk and its workspace do not fit.
  int64_t begin_call() const;
  // The call ended: the cache and workspace go.
  void end_call() const;
  // Decodes done since the source opened (tests: "each chunk once").
  int64_t chunks_decoded() const;

 private:
  struct Cache;
  std::string chunk_what(int64_t id) const;
  void check_rows(int64_t n_chunks) const;  // ValueError for a row out of range
  // Where chunk `id` of the grid is stored; null when it is not.
  const ChunkLocation* location(int64_t id) const;
  const File& file(int64_t index) const;
  // The stored bytes of chunk `id` at `c`: nbytes, or the rest of its file;
  // checked against the file's size (and, uncompressed, the chunk's size).
  int64_t stored_size(int64_t id, const ChunkLocation& c) const;
  const std::byte* decoded_chunk(int64_t id, const ChunkLocation& c) const;
  // The file offset of stored bytes [at, at + bytes) of chunk `id`, checked
  // against its stored size; and their read.
  uint64_t stored_offset(int64_t id, const ChunkLocation& c, int64_t at, int64_t bytes) const;
  void read_stored(int64_t id, const ChunkLocation& c, std::byte* dst, int64_t at,
                   int64_t bytes) const;
  void read_cached(void* dst, int64_t first, int64_t count) const;
  void read_streaming(void* dst, int64_t first, int64_t count) const;
  void drop() const;

  ChunkTable table_;
  std::vector<int64_t> grid_;  // chunks per axis
  int64_t chunk_numel_ = 1;    // elements per chunk
  int64_t chunk_bytes_ = 0;    // decoded bytes per chunk (checked: fits int64)
  int64_t stored_limit_ = 0;   // the most stored bytes any encoding of a chunk takes
  size_t decoded_cap_ = 0;     // workspace bytes of one decoded chunk
  size_t stored_cap_ = 0;      // workspace bytes of one stored chunk
  bool raw_ = false;           // no codecs but byteswap: read runs straight from the file
  bool streamable_ = false;    // one chunk, a stream codec, then skip/byteswap only
  mutable std::mutex mu_;
  mutable std::vector<std::unique_ptr<File>> open_files_;
  mutable std::vector<uint64_t> file_sizes_;  // of each file, when opened
  mutable std::unique_ptr<Cache> cache_;
  mutable int calls_ = 0;
  mutable int64_t slots_ = 0;  // cache capacity in chunks for the running call
  mutable bool stream_mode_ = false;
  mutable int64_t decoded_ = 0;
};

// The chunked sources of `arrays` reserve their bytes for one engine call
// (after the BudgetTurn); non-chunked arrays are skipped.
class ChunkReservation {
 public:
  explicit ChunkReservation(const std::vector<std::shared_ptr<StoredArray>>& arrays);
  explicit ChunkReservation(const std::vector<int32_t>& handles);
  ~ChunkReservation();
  ChunkReservation(const ChunkReservation&) = delete;
  ChunkReservation& operator=(const ChunkReservation&) = delete;

 private:
  void release();
  std::vector<std::shared_ptr<const ChunkedSource>> sources_;
  int64_t reserved_ = 0;
};

// Writes every chunk of `source` (C order of the grid of `chunk_shape`)
// encoded with `codecs` (encoding order) to paths[i] (none: skipped). Edge
// chunks full size, zero padded. Returns each chunk's stored size (0 when
// skipped). Files are fdatasync'ed. Takes the budget turn itself.
std::vector<int64_t> write_chunked(const std::shared_ptr<StoredArray>& source,
                                   const std::vector<int64_t>& chunk_shape,
                                   const std::vector<CodecStep>& codecs,
                                   const std::vector<std::optional<std::string>>& paths);

}  // namespace jask
