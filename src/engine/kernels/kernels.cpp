#include "kernels/kernels.hpp"

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "base/errors.hpp"

namespace jask {

size_t compute_itemsize(DType dt) {
  if (dtype_kind(dt) == DKind::kComplex)
    throw TypeError(std::string("the engine's matmul and scatter-add do not compute ") +
                    dtype_name(dt) + " values");
  return (dt == DType::f64 || dtype_kind(dt) != DKind::kFloat) ? 8 : 4;
}

namespace {

// One storage element of integer (or bool) dtype `dt` as an int64 register value.
int64_t load_int(DType dt, const unsigned char* p) {
  switch (dt) {
    case DType::i8: return static_cast<int8_t>(*p);
    case DType::u8:
    case DType::b8: return *p;
    case DType::i16: {
      int16_t v;
      std::memcpy(&v, p, 2);
      return v;
    }
    case DType::u16: {
      uint16_t v;
      std::memcpy(&v, p, 2);
      return v;
    }
    case DType::i32: {
      int32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case DType::u32: {
      uint32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
    default: {
      int64_t v;
      std::memcpy(&v, p, 8);
      return v;
    }
  }
}

float load_narrow_float(DType dt, const unsigned char* p) {
  if (is_float8(dt)) return f8_to_f32(dt, *p);
  uint16_t v;
  std::memcpy(&v, p, 2);
  return dt == DType::f16 ? f16_to_f32(v) : bf16_to_f32(v);
}

void store_narrow_float(DType dt, float f, unsigned char* p) {
  if (is_float8(dt)) {
    *p = f32_to_f8(dt, f);
    return;
  }
  const uint16_t v = dt == DType::f16 ? f32_to_f16(f) : f32_to_bf16(f);
  std::memcpy(p, &v, 2);
}

}  // namespace

namespace {

template <class S>
void load_as_int64(const void* src, int64_t n, int64_t* dst) {
  const auto* s = static_cast<const unsigned char*>(src);
  for (int64_t i = 0; i < n; ++i) {
    S v;
    std::memcpy(&v, s + i * static_cast<int64_t>(sizeof(S)), sizeof(S));
    dst[i] = static_cast<int64_t>(v);
  }
}

template <class S>
void store_as(const int64_t* src, int64_t n, void* dst) {
  auto* d = static_cast<unsigned char*>(dst);
  for (int64_t i = 0; i < n; ++i) {
    const auto v = static_cast<S>(src[i]);  // modulo 2^width: XLA's integer wrap-around
    std::memcpy(d + i * static_cast<int64_t>(sizeof(S)), &v, sizeof(S));
  }
}

}  // namespace

void load_ints(DType dt, const void* src, int64_t n, int64_t* dst) {
  switch (dt) {
    case DType::i8: return load_as_int64<int8_t>(src, n, dst);
    case DType::u8: return load_as_int64<uint8_t>(src, n, dst);
    case DType::b8: return load_as_int64<uint8_t>(src, n, dst);
    case DType::i16: return load_as_int64<int16_t>(src, n, dst);
    case DType::u16: return load_as_int64<uint16_t>(src, n, dst);
    case DType::i32: return load_as_int64<int32_t>(src, n, dst);
    case DType::u32: return load_as_int64<uint32_t>(src, n, dst);
    case DType::i64:
    case DType::u64: return load_as_int64<int64_t>(src, n, dst);
    default:
      throw TypeError(std::string("load_ints: ") + dtype_name(dt) + " is not an integer dtype");
  }
}

void store_ints(const int64_t* src, int64_t n, DType dt, void* dst) {
  switch (dt) {
    case DType::i8:
    case DType::u8: return store_as<uint8_t>(src, n, dst);
    case DType::b8: {
      auto* d = static_cast<uint8_t*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = src[i] != 0;
      return;
    }
    case DType::i16:
    case DType::u16: return store_as<uint16_t>(src, n, dst);
    case DType::i32:
    case DType::u32: return store_as<uint32_t>(src, n, dst);
    case DType::i64:
    case DType::u64: return store_as<uint64_t>(src, n, dst);
    default:
      throw TypeError(std::string("store_ints: ") + dtype_name(dt) + " is not an integer dtype");
  }
}

void widen_in_place(DType dt, void* buf, int64_t n) {
  if (dt == DType::f32 || dt == DType::f64) return;
  // Storage sits in the back of the buffer; writing element i forward never
  // overtakes unread storage element i+1.
  size_t cs = compute_itemsize(dt), ss = itemsize(dt);
  auto* base = static_cast<unsigned char*>(buf);
  const unsigned char* src = base + static_cast<size_t>(n) * (cs - ss);
  const bool integer = dtype_kind(dt) != DKind::kFloat;
  for (int64_t i = 0; i < n; ++i) {
    if (integer) {
      const int64_t v = load_int(dt, src + i * ss);
      std::memcpy(base + i * cs, &v, cs);
    } else {
      const float f = load_narrow_float(dt, src + i * ss);
      std::memcpy(base + i * cs, &f, cs);
    }
  }
}

void narrow_in_place(DType dt, void* buf, int64_t n) {
  if (dt == DType::f32 || dt == DType::f64) return;
  size_t cs = compute_itemsize(dt), ss = itemsize(dt);
  auto* base = static_cast<unsigned char*>(buf);
  if (dtype_kind(dt) != DKind::kFloat) {
    // Element i's storage ends before element i + 1's int64 begins: a forward copy is safe.
    for (int64_t i = 0; i < n; ++i) {
      int64_t v;
      std::memcpy(&v, base + i * cs, cs);
      store_ints(&v, 1, dt, base + i * ss);
    }
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    float f;
    std::memcpy(&f, base + i * cs, cs);
    store_narrow_float(dt, f, base + i * ss);
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
