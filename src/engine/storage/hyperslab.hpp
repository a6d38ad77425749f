// Reading and writing rectangular sub-blocks ("hyperslabs") of an on-disk
// C-order array as a sequence of contiguous runs, into a dense tile buffer.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "storage/array_store.hpp"

namespace jask {

struct Slab {
  std::vector<int64_t> start;
  std::vector<int64_t> extent;
  int64_t numel() const;
};

// Calls fn(first element in the file, first element in the tile, length)
// for every contiguous run; trailing axes covered fully merge into one run.
template <class Fn>
void for_each_run(const std::vector<int64_t>& shape, const Slab& slab, Fn fn) {
  const int nd = static_cast<int>(shape.size());
  if (nd == 0) return fn(int64_t{0}, int64_t{0}, int64_t{1});
  int m = nd - 1;
  while (m > 0 && slab.extent[m] == shape[m]) --m;
  std::vector<int64_t> stride(nd);
  int64_t s = 1;
  for (int d = nd - 1; d >= 0; --d) {
    stride[d] = s;
    s *= shape[d];
  }
  const int64_t run = slab.extent[m] * stride[m];
  if (run == 0) return;
  for (int d = 0; d < m; ++d)
    if (slab.extent[d] == 0) return;
  std::vector<int64_t> idx(m, 0);
  int64_t tile_pos = 0;
  while (true) {
    int64_t file_pos = slab.start[m] * stride[m];
    for (int d = 0; d < m; ++d) file_pos += (slab.start[d] + idx[d]) * stride[d];
    fn(file_pos, tile_pos, run);
    tile_pos += run;
    int d = m - 1;
    for (; d >= 0; --d) {
      if (++idx[d] < slab.extent[d]) break;
      idx[d] = 0;
    }
    if (d < 0) return;
  }
}

// What a matmul's tiles leave of the budget for read_slab's bounce buffers
// (a column panel's short runs read direct): a 32nd of it, at most all its
// readers' buffers.
int64_t slab_bounce_reserve();

void read_slab(const StoredArray& array, const std::vector<int64_t>& shape, const Slab& slab,
               void* dst);

// Where read_slab_in_place puts a slab's runs in a buffer (4096-aligned, of
// `bytes`): run r at byte lead + r * pitch, at its file offset's alignment
// (mod 4096), with the pages around it its own (pitch leaves two pages
// between runs). The tile's leading dimension is pitch / itemsize.
struct InPlaceLayout {
  int64_t lead = 0, pitch = 0, bytes = 0;
};
// The most bytes an InPlaceLayout of `runs` runs of `run_bytes` takes: what a
// buffer reserves to read such a tile in place.
int64_t in_place_bytes(int64_t runs, int64_t run_bytes);
// The layout for `slab`, or nullopt where reading in place buys nothing or
// cannot be done: a slab of one run, a chunked array, or runs whose file
// offsets do not all step by the same amount mod 4096.
std::optional<InPlaceLayout> in_place_layout(const StoredArray& array,
                                             const std::vector<int64_t>& shape, const Slab& slab);
// read_slab into `layout` with StoredArray::read_elems_in_place: each run's
// pages read direct into the buffer, no bounce buffer and no copy (a strided
// tile's rows; where direct reads are off, each run is read exactly).
void read_slab_in_place(const StoredArray& array, const std::vector<int64_t>& shape,
                        const Slab& slab, const InPlaceLayout& layout, void* buffer);
void write_slab(const StoredArray& array, const std::vector<int64_t>& shape, const Slab& slab,
                const void* src);

}  // namespace jask
