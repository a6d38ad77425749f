#include "hyperslab.hpp"

namespace jask {

int64_t Slab::numel() const {
  int64_t n = 1;
  for (int64_t e : extent) n *= e;
  return n;
}

void read_slab(const StoredArray& array, const std::vector<int64_t>& shape, const Slab& slab, void* dst) {
  const size_t isz = itemsize(array.info().dtype);
  auto* out = static_cast<unsigned char*>(dst);
  for_each_run(shape, slab, [&](int64_t file_pos, int64_t tile_pos, int64_t len) {
    array.read_elems(out + tile_pos * isz, file_pos, len);
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
