#include "storage/hyperslab.hpp"

#include <algorithm>

#include "base/concurrency.hpp"
#include "base/memory_budget.hpp"
#include "plan/planner.hpp"

namespace jask {

namespace {

// A slab of many short runs (a column panel of a wide matrix) is latency
// bound when read one run at a time: spread the runs over this many
// threads, each taking a consecutive share so its reads stay in file order.
constexpr size_t kRunReaders = 8;
// Reading in place needs no bounce buffer per reader: twice the requests in
// flight, which keeps the disk busier while BLAS holds both cores (a capped
// W3's strided rows: 3.21 / 3.33 / 3.35 s against 3.34 / 3.34 / 3.45 s with 8).
constexpr size_t kInPlaceReaders = 2 * kRunReaders;
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

namespace {

std::vector<Run> slab_runs(const std::vector<int64_t>& shape, const Slab& slab) {
  std::vector<Run> runs;
  for_each_run(shape, slab, [&](int64_t file_pos, int64_t tile_pos, int64_t len) {
    runs.push_back(Run{file_pos, tile_pos, len});
  });
  return runs;
}

// Whether a slab's runs are short: latency bound one at a time.
bool short_runs(const StoredArray& array, const std::vector<Run>& runs) {
  const int64_t isz = static_cast<int64_t>(itemsize(array.info().dtype));
  return !runs.empty() && runs.front().len * isz < kShortRunBytes && array.chunked() == nullptr;
}

size_t readers_for(const StoredArray& array, const std::vector<Run>& runs, size_t most) {
  return short_runs(array, runs) ? std::clamp<size_t>(runs.size() / kMinRunsPerReader, 1, most) : 1;
}

// read_run(reader, r) for every run, each of `readers` taking a consecutive share.
template <class ReadRun>
void read_shares(size_t runs, size_t readers, ReadRun read_run) {
  run_concurrently(readers, [&](size_t reader) {
    const size_t begin = runs * reader / readers, end = runs * (reader + 1) / readers;
    for (size_t r = begin; r < end; ++r) read_run(reader, r);
  });
}

}  // namespace

void read_slab(const StoredArray& array, const std::vector<int64_t>& shape, const Slab& slab,
               void* dst) {
  const int64_t isz = static_cast<int64_t>(itemsize(array.info().dtype));
  auto* out = static_cast<unsigned char*>(dst);
  const std::vector<Run> runs = slab_runs(shape, slab);
  // Reads of a chunked array run one at a time (one decode cache): one reader.
  const size_t readers = readers_for(array, runs, kRunReaders);
  const int64_t bounce_bytes = runs.empty() ? 0 : runs.front().len * isz + kBounceSlack;
  const bool bounce =
      short_runs(array, runs) && runs.front().len * isz <= kBounceRunBytes &&
      buffer_bytes() + mapped_bytes(bounce_bytes, static_cast<int64_t>(readers)) <= memory_budget();
  std::vector<AlignedBuffer> buffers(readers);
  if (bounce)
    for (auto& b : buffers) b = AlignedBuffer(static_cast<size_t>(bounce_bytes));
  read_shares(runs.size(), readers, [&](size_t reader, size_t r) {
    array.read_elems(out + runs[r].tile_pos * isz, runs[r].file_pos, runs[r].len,
                     bounce ? &buffers[reader] : nullptr);
  });
}

int64_t in_place_bytes(int64_t runs, int64_t run_bytes) {
  const auto page = static_cast<int64_t>(kIoAlignment);
  return runs * (run_bytes + 3 * page) + page;
}

std::optional<InPlaceLayout> in_place_layout(const StoredArray& array,
                                             const std::vector<int64_t>& shape, const Slab& slab) {
  const std::vector<Run> runs = slab_runs(shape, slab);
  if (runs.size() < 2 || array.chunked() != nullptr) return std::nullopt;
  const auto isz = itemsize(array.info().dtype);
  const auto page = static_cast<int64_t>(kIoAlignment);
  auto offset = [&](const Run& r) {
    return static_cast<int64_t>(array.layout().byte_of(r.file_pos, isz) % kIoAlignment);
  };
  const int64_t step = ((offset(runs[1]) - offset(runs[0])) % page + page) % page;
  for (size_t r = 1; r < runs.size(); ++r) {
    if (((offset(runs[r]) - offset(runs[r - 1])) % page + page) % page != step) return std::nullopt;
  }
  const int64_t run_bytes = runs.front().len * static_cast<int64_t>(isz);
  // Two pages between runs keep each run's surrounding pages apart from the
  // next one's; the pitch then steps like the file offsets mod 4096 (every
  // term is a multiple of the itemsize, which divides 4096).
  const int64_t min_pitch = run_bytes + 2 * page;
  InPlaceLayout layout;
  layout.lead = offset(runs[0]);
  layout.pitch = min_pitch + ((step - min_pitch) % page + page) % page;
  layout.bytes =
      layout.lead + static_cast<int64_t>(runs.size() - 1) * layout.pitch + run_bytes + page;
  return layout;
}

void read_slab_in_place(const StoredArray& array, const std::vector<int64_t>& shape,
                        const Slab& slab, const InPlaceLayout& layout, void* buffer) {
  auto* out = static_cast<unsigned char*>(buffer) + layout.lead;
  const std::vector<Run> runs = slab_runs(shape, slab);
  read_shares(runs.size(), readers_for(array, runs, kInPlaceReaders), [&](size_t, size_t r) {
    array.read_elems_in_place(out + static_cast<int64_t>(r) * layout.pitch, runs[r].file_pos,
                              runs[r].len);
  });
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
