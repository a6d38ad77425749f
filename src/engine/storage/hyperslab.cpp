#include "storage/hyperslab.hpp"

#include <algorithm>

#include "base/concurrency.hpp"
#include "base/memory_budget.hpp"

namespace jask {

namespace {

// A slab of many short runs (a column panel of a wide matrix) is latency
// bound when read one run at a time: spread the runs over this many
// threads, each taking a consecutive share so its reads stay in file order.
constexpr size_t kRunReaders = 8;
constexpr int64_t kShortRunBytes = 1 << 20;
constexpr size_t kMinRunsPerReader = 16;
// Short runs whose memory is not at their file offset's alignment would go
// through the page cache, whose readahead around them read a matrix's column
// panels about twice under a memory cap: each reader reads runs up to this
// long direct into a bounce buffer of its own (freed when the slab is read)
// and copies them out, when the buffers fit in what the budget leaves
// (plan_matmul leaves slab_bounce_reserve() for them).
constexpr int64_t kBounceRunBytes = 256 << 10;
constexpr int64_t kBounceSlack = 2 * static_cast<int64_t>(kIoAlignment);  // the pages around a run

struct Run {
  int64_t file_pos, tile_pos, len;
};

}  // namespace

int64_t slab_bounce_reserve() {
  return std::min(memory_budget() / 32,
                  static_cast<int64_t>(kRunReaders) * (kBounceRunBytes + kBounceSlack));
}

int64_t Slab::numel() const {
  int64_t n = 1;
  for (int64_t e : extent) n *= e;
  return n;
}

void read_slab(const StoredArray& array, const std::vector<int64_t>& shape, const Slab& slab,
               void* dst) {
  const int64_t isz = static_cast<int64_t>(itemsize(array.info().dtype));
  auto* out = static_cast<unsigned char*>(dst);
  std::vector<Run> runs;
  for_each_run(shape, slab, [&](int64_t file_pos, int64_t tile_pos, int64_t len) {
    runs.push_back(Run{file_pos, tile_pos, len});
  });
  // Reads of a chunked array run one at a time (one decode cache): one reader.
  const bool short_runs =
      !runs.empty() && runs.front().len * isz < kShortRunBytes && array.chunked() == nullptr;
  const size_t readers =
      short_runs ? std::clamp<size_t>(runs.size() / kMinRunsPerReader, 1, kRunReaders) : 1;
  const int64_t bounce_bytes = runs.empty() ? 0 : runs.front().len * isz + kBounceSlack;
  const bool bounce =
      short_runs && runs.front().len * isz <= kBounceRunBytes &&
      buffer_bytes() + static_cast<int64_t>(readers) * bounce_bytes <= memory_budget();
  auto read_share = [&](size_t reader) {
    const size_t begin = runs.size() * reader / readers, end = runs.size() * (reader + 1) / readers;
    AlignedBuffer buffer(bounce ? static_cast<size_t>(bounce_bytes) : 0);
    for (size_t r = begin; r < end; ++r)
      array.read_elems(out + runs[r].tile_pos * isz, runs[r].file_pos, runs[r].len,
                       bounce ? &buffer : nullptr);
  };
  run_concurrently(readers, read_share);
}

void write_slab(const StoredArray& array, const std::vector<int64_t>& shape, const Slab& slab,
                const void* src) {
  const size_t isz = itemsize(array.info().dtype);
  auto* in = static_cast<const unsigned char*>(src);
  for_each_run(shape, slab, [&](int64_t file_pos, int64_t tile_pos, int64_t len) {
    array.write_elems(in + tile_pos * isz, file_pos, len);
  });
}

}  // namespace jask
