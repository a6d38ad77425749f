#include "kernels/kernels.hpp"

#include <cstring>
#include <vector>

namespace jask {

size_t compute_itemsize(DType dt) {
  return (dt == DType::f64 || dt == DType::i32 || dt == DType::b8) ? 8 : 4;
}

void widen_in_place(DType dt, void* buf, int64_t n) {
  if (dt == DType::f32 || dt == DType::f64) return;
  // Storage sits in the back of the buffer; writing element i forward never
  // overtakes unread storage element i+1.
  size_t cs = compute_itemsize(dt), ss = itemsize(dt);
  auto* base = static_cast<unsigned char*>(buf);
  const unsigned char* src = base + static_cast<size_t>(n) * (cs - ss);
  for (int64_t i = 0; i < n; ++i) {
    if (dt == DType::i32) {
      int32_t v;
      std::memcpy(&v, src + i * ss, ss);
      double d = v;
      std::memcpy(base + i * cs, &d, cs);
    } else {
      uint16_t v;
      std::memcpy(&v, src + i * ss, ss);
      float f = dt == DType::f16 ? f16_to_f32(v) : bf16_to_f32(v);
      std::memcpy(base + i * cs, &f, cs);
    }
  }
}

void narrow_in_place(DType dt, void* buf, int64_t n) {
  if (dt == DType::f32 || dt == DType::f64) return;
  size_t cs = compute_itemsize(dt), ss = itemsize(dt);
  auto* base = static_cast<unsigned char*>(buf);
  for (int64_t i = 0; i < n; ++i) {
    if (dt == DType::i32) {
      double d;
      std::memcpy(&d, base + i * cs, cs);
      auto v = static_cast<int32_t>(static_cast<uint32_t>(static_cast<int64_t>(d)));
      std::memcpy(base + i * ss, &v, ss);
    } else {
      float f;
      std::memcpy(&f, base + i * cs, cs);
      uint16_t v = dt == DType::f16 ? f32_to_f16(f) : f32_to_bf16(f);
      std::memcpy(base + i * ss, &v, ss);
    }
  }
}

void permute_tile(const void* in_v, void* out_v, const int64_t* in_ext, const int64_t* perm, int nd,
                  size_t elem_bytes) {
  if (nd == 0) {
    std::memcpy(out_v, in_v, elem_bytes);
    return;
  }
  std::vector<int64_t> in_stride(nd), out_ext(nd), src_stride(nd), idx(nd, 0);
  int64_t s = 1;
  for (int d = nd - 1; d >= 0; --d) {
    in_stride[d] = s;
    s *= in_ext[d];
  }
  const int64_t total = s;
  for (int d = 0; d < nd; ++d) {
    out_ext[d] = in_ext[perm[d]];
    src_stride[d] = in_stride[perm[d]];
  }
  auto* in = static_cast<const unsigned char*>(in_v);
  auto* out = static_cast<unsigned char*>(out_v);
  // Walk the output in C order, the matching input offset kept incrementally.
  int64_t src = 0;
  const int64_t inner = out_ext[nd - 1], inner_stride = src_stride[nd - 1];
  for (int64_t o = 0; o < total; o += inner) {
    for (int64_t j = 0; j < inner; ++j) {
      std::memcpy(out + (o + j) * elem_bytes, in + (src + j * inner_stride) * elem_bytes,
                  elem_bytes);
    }
    for (int d = nd - 2; d >= 0; --d) {
      src += src_stride[d];
      if (++idx[d] < out_ext[d]) break;
      src -= src_stride[d] * out_ext[d];
      idx[d] = 0;
    }
  }
}

}  // namespace jask
