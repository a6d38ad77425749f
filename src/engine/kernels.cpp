#include "kernels.hpp"

#include <cstring>
#include <vector>

#include "errors.hpp"

namespace jask {
namespace {

// Storage type <-> compute type, per dtype.
template <DType D> struct Traits;
template <> struct Traits<DType::f32> {
  using S = float; using C = float;
  static C load(S v) { return v; }
  static S store(C v) { return v; }
};
template <> struct Traits<DType::f64> {
  using S = double; using C = double;
  static C load(S v) { return v; }
  static S store(C v) { return v; }
};
template <> struct Traits<DType::f16> {
  using S = uint16_t; using C = float;
  static C load(S v) { return f16_to_f32(v); }
  static S store(C v) { return f32_to_f16(v); }
};
template <> struct Traits<DType::bf16> {
  using S = uint16_t; using C = float;
  static C load(S v) { return bf16_to_f32(v); }
  static S store(C v) { return f32_to_bf16(v); }
};
template <> struct Traits<DType::i32> {
  using S = int32_t; using C = int64_t;
  static C load(S v) { return v; }
  // int32 arithmetic wraps, as in numpy and XLA
  static S store(C v) { return static_cast<S>(static_cast<uint32_t>(static_cast<uint64_t>(v))); }
};

template <> struct Traits<DType::b8> {
  using S = uint8_t; using C = int64_t;
  static C load(S v) { return v != 0; }
  static S store(C v) { return v != 0; }
};

template <DType D, class F>
void unary(const void* a_v, void* out_v, int64_t n, F f) {
  using T = Traits<D>;
  auto* a = static_cast<const typename T::S*>(a_v);
  auto* out = static_cast<typename T::S*>(out_v);
  for (int64_t i = 0; i < n; ++i) out[i] = T::store(f(T::load(a[i])));
}

template <DType D, class F>
void binary(const void* a_v, const void* b_v, void* out_v, int64_t n, F f) {
  using T = Traits<D>;
  auto* a = static_cast<const typename T::S*>(a_v);
  auto* b = static_cast<const typename T::S*>(b_v);
  auto* out = static_cast<typename T::S*>(out_v);
  for (int64_t i = 0; i < n; ++i) out[i] = T::store(f(T::load(a[i]), T::load(b[i])));
}

template <DType D>
void map_typed(MapOp op, const void* a, const void* b, void* out, int64_t n, double scalar) {
  using C = typename Traits<D>::C;
  const C s = static_cast<C>(scalar);
  switch (op) {
    case MapOp::kAdd: return binary<D>(a, b, out, n, [](C x, C y) { return x + y; });
    case MapOp::kSub: return binary<D>(a, b, out, n, [](C x, C y) { return x - y; });
    case MapOp::kMul: return binary<D>(a, b, out, n, [](C x, C y) { return x * y; });
    case MapOp::kNeg: return unary<D>(a, out, n, [](C x) { return -x; });
    case MapOp::kSquare: return unary<D>(a, out, n, [](C x) { return x * x; });
    case MapOp::kScale: return unary<D>(a, out, n, [s](C x) { return x * s; });
    case MapOp::kAddScalar: return unary<D>(a, out, n, [s](C x) { return x + s; });
    case MapOp::kRsubScalar: return unary<D>(a, out, n, [s](C x) { return s - x; });
    case MapOp::kCopy:
      std::memcpy(out, a, static_cast<size_t>(n) * sizeof(typename Traits<D>::S));
      return;
    case MapOp::kFill: {
      auto* o = static_cast<typename Traits<D>::S*>(out);
      const auto v = Traits<D>::store(s);
      for (int64_t i = 0; i < n; ++i) o[i] = v;
      return;
    }
  }
}

template <DType D>
double reduce_typed(ReduceOp op, const void* a_v, const void* b_v, int64_t n) {
  using T = Traits<D>;
  auto* a = static_cast<const typename T::S*>(a_v);
  // Four independent accumulators let the compiler vectorise the loop.
  double acc[4] = {0, 0, 0, 0};
  int64_t i = 0;
  if (op == ReduceOp::kSum) {
    for (; i + 4 <= n; i += 4)
      for (int j = 0; j < 4; ++j) acc[j] += static_cast<double>(T::load(a[i + j]));
    for (; i < n; ++i) acc[0] += static_cast<double>(T::load(a[i]));
  } else {
    auto* b = static_cast<const typename T::S*>(b_v);
    for (; i + 4 <= n; i += 4)
      for (int j = 0; j < 4; ++j)
        acc[j] += static_cast<double>(T::load(a[i + j])) * static_cast<double>(T::load(b[i + j]));
    for (; i < n; ++i) acc[0] += static_cast<double>(T::load(a[i])) * static_cast<double>(T::load(b[i]));
  }
  return (acc[0] + acc[1]) + (acc[2] + acc[3]);
}

template <class Fn>
auto dispatch(DType dt, Fn&& fn) {
  switch (dt) {
    case DType::f32: return fn(std::integral_constant<DType, DType::f32>{});
    case DType::f64: return fn(std::integral_constant<DType, DType::f64>{});
    case DType::f16: return fn(std::integral_constant<DType, DType::f16>{});
    case DType::bf16: return fn(std::integral_constant<DType, DType::bf16>{});
    case DType::i32: return fn(std::integral_constant<DType, DType::i32>{});
    case DType::b8: return fn(std::integral_constant<DType, DType::b8>{});
  }
  throw TypeError("unsupported dtype code " + std::to_string(static_cast<int>(dt)));
}

}  // namespace

std::optional<MapOp> map_op_from_name(const std::string& name) {
  if (name == "add") return MapOp::kAdd;
  if (name == "sub") return MapOp::kSub;
  if (name == "mul") return MapOp::kMul;
  if (name == "neg") return MapOp::kNeg;
  if (name == "square") return MapOp::kSquare;
  if (name == "scale") return MapOp::kScale;
  if (name == "add_scalar") return MapOp::kAddScalar;
  if (name == "rsub_scalar") return MapOp::kRsubScalar;
  if (name == "copy") return MapOp::kCopy;
  if (name == "fill") return MapOp::kFill;
  return std::nullopt;
}

int map_op_arity(MapOp op) {
  switch (op) {
    case MapOp::kAdd: case MapOp::kSub: case MapOp::kMul: return 2;
    case MapOp::kFill: return 0;
    default: return 1;
  }
}

void map_block(MapOp op, DType dt, const void* a, const void* b, void* out, int64_t n, double scalar) {
  dispatch(dt, [&](auto d) { map_typed<decltype(d)::value>(op, a, b, out, n, scalar); });
}

std::optional<ReduceOp> reduce_op_from_name(const std::string& name) {
  if (name == "sum") return ReduceOp::kSum;
  if (name == "sum_mul") return ReduceOp::kSumMul;
  return std::nullopt;
}

int reduce_op_arity(ReduceOp op) { return op == ReduceOp::kSum ? 1 : 2; }

double reduce_block(ReduceOp op, DType dt, const void* a, const void* b, int64_t n) {
  return dispatch(dt, [&](auto d) { return reduce_typed<decltype(d)::value>(op, a, b, n); });
}

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
      std::memcpy(out + (o + j) * elem_bytes, in + (src + j * inner_stride) * elem_bytes, elem_bytes);
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
