// Scans along one axis, streamed in flat C-order blocks with a running value
// per position of the axes after it (the carry, `inner` values: doubles for
// floats, int64 for integers, exact) that crosses
// block boundaries: the cumulative reductions (one output element per input
// element, forward or reverse) and argmax / argmin (one index per line along
// the axis, emitted when the line ends).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "base/errors.hpp"
#include "call/registry.hpp"
#include "exec/pipeline.hpp"
#include "io/file.hpp"
#include "kernels/along_axis.hpp"
#include "plan/planner.hpp"
#include "program/broadcast.hpp"
#include "program/reduction.hpp"
#include "storage/array_store.hpp"

namespace jask {
namespace {

Registry& reg() { return Registry::instance(); }

// jnp.logaddexp: equal infinities (and NaN) give their sum.
double log_add_exp(double a, double b) {
  const double delta = a - b;
  if (delta != delta) return a + b;
  return std::max(a, b) + std::log1p(std::exp(-std::fabs(delta)));
}

struct LogAddExp {
  double operator()(double a, double b) const { return log_add_exp(a, b); }
};

Reduction reduction_named(const std::string& op, const std::string& reduction) {
  for (const ReductionRule& r : kReductions)
    if (reduction == r.name) return r.kind;
  throw ValueError(op + ": unknown reduction \"" + reduction + "\"");
}

// Calls f(value type, fold) with the fold of `reduction` for values of `dt`: the reductions'
// table (NaN propagates through max and min, as in lax.cummax) or logaddexp for cumlogsumexp,
// in double, for floats; IntFold, in int64, for integers.
template <class F>
void with_cumulative_fold(const std::string& op, const std::string& reduction, DType dt, F&& f) {
  if (folds_as_int(dt)) {
    if (reduction == "logsumexp")
      throw TypeError(op + ": " + dtype_name(dt) + " values have no logsumexp (it needs floats)");
    return with_int_fold(reduction_named(op, reduction), dt,
                         [&](auto fold) { f(int64_t{}, fold); });
  }
  if (reduction == "logsumexp") return f(double{}, LogAddExp{});
  with_reduction(reduction_named(op, reduction),
                 [&](auto r) { f(double{}, TableFold<decltype(r)::value>{}); });
}

// Position along the axis (k) and within the inner block (q) of flat element
// `e`, stepped forward or backward one element at a time.
struct LinePosition {
  const AxisView& v;
  int64_t k, q;
  LinePosition(const AxisView& view, int64_t e)
      : v(view), k((e / view.inner) % view.n), q(e % view.inner) {}
  void next() {
    if (++q == v.inner) {
      q = 0;
      if (++k == v.n) k = 0;
    }
  }
  void previous() {
    if (--q < 0) {
      q = v.inner - 1;
      if (--k < 0) k = v.n - 1;
    }
  }
};

struct CumulativeParams {
  std::string reduction;
  int64_t axis = 0;
  bool reverse = false;
};
const Schema<CumulativeParams> kCumulativeSchema{field("reduction", &CumulativeParams::reduction),
                                                 field("axis", &CumulativeParams::axis),
                                                 field("reverse", &CumulativeParams::reverse)};

// out[..., k, ...] = fold of in[..., 0..k, ...] (reverse: of in[..., k..n-1, ...]), folded in
// Acc.
template <class Acc, class Fold>
int32_t cumulative(const CumulativeParams& p, const ArrayRef& in, const std::string& op,
                   Fold fold) {
  const ArrayInfo& info = in->info();
  const AxisView v = axis_view(info, p.axis, op);
  auto out = StoredArray::create_scratch(info, op, ScratchContents::kOverwritten);
  const auto isz = static_cast<int64_t>(itemsize(info.dtype));
  const int64_t numel = info.numel();
  constexpr auto acc_size = static_cast<int64_t>(sizeof(Acc));
  const int64_t carry_bytes = v.inner * acc_size;
  // Per element: the input and output blocks (two slots each) and the values they convert through.
  const int64_t block = plan_stream_block(op, info.describe(), numel, 2 * isz + acc_size,
                                          carry_bytes, BlockBuffers{2, 1, isz});
  const int64_t n_tasks = numel == 0 ? 0 : (numel + block - 1) / block;
  auto reader = make_reader(in, info.shape, 0);
  StreamBuffers in_buf(block * isz + static_cast<int64_t>(kIoAlignment)), out_buf(block * isz);
  std::vector<Acc> values(static_cast<size_t>(block)), carry(static_cast<size_t>(v.inner));
  // Reverse scans visit the blocks, and the elements in each, from the end.
  auto range = [&](int64_t t) {
    const int64_t b = p.reverse ? n_tasks - 1 - t : t;
    return std::pair(b * block, std::min(block, numel - b * block));
  };
  auto input = [&](int64_t t) { return in_buf.at(t) + reader->alignment_shift(range(t).first); };
  PipelineStages stages;
  stages.read = [&](int64_t t) {
    auto [first, count] = range(t);
    reader->read(first, count, input(t));
  };
  stages.compute = [&](int64_t t) {
    auto [first, count] = range(t);
    load_folded(info.dtype, input(t), count, values.data());
    if (p.reverse) {
      LinePosition pos(v, first + count - 1);
      for (int64_t i = count - 1; i >= 0; --i, pos.previous()) {
        Acc& c = carry[static_cast<size_t>(pos.q)];
        Acc& x = values[static_cast<size_t>(i)];
        c = pos.k == v.n - 1 ? x : fold(c, x);
        x = c;
      }
    } else {
      LinePosition pos(v, first);
      for (int64_t i = 0; i < count; ++i, pos.next()) {
        Acc& c = carry[static_cast<size_t>(pos.q)];
        Acc& x = values[static_cast<size_t>(i)];
        c = pos.k == 0 ? x : fold(c, x);
        x = c;
      }
    }
    store_folded(values.data(), count, info.dtype, out_buf.at(t));
  };
  stages.write = [&](int64_t t) {
    auto [first, count] = range(t);
    out->write_elems(out_buf.at(t), first, count);
  };
  run_pipeline(n_tasks, stages);
  return reg().add(out);
}

int32_t run_cumulative(const KernelCall& call, const CumulativeParams& p) {
  expect_operands(call, 1, 0, 0);
  ArrayRef in = reg().get(call.operands.handles[0]);
  const std::string op = "cum" + p.reduction;
  int32_t out = -1;
  with_cumulative_fold(op, p.reduction, in->info().dtype, [&](auto acc, auto fold) {
    out = cumulative<decltype(acc)>(p, in, op, fold);
  });
  return out;
}
const KernelRegistration kCumulativeKernel{"cumulative", kCumulativeSchema, run_cumulative};

struct ArgReduceParams {
  std::string reduction;  // "max" or "min"
  int64_t axis = 0;
};
const Schema<ArgReduceParams> kArgReduceSchema{field("reduction", &ArgReduceParams::reduction),
                                               field("axis", &ArgReduceParams::axis)};

template <class T>
bool is_nan(T v) {
  if constexpr (std::is_floating_point_v<T>) return v != v;
  return false;
}

// The index along `axis` of each line's largest (smallest) element: the
// first one of ties, and the first NaN if there is one (as jnp.argmax).
// `emit(first, count, indices)` receives them in output order.
// The values compare as T: double for floats, int64_t or uint64_t for integers (exactly).
template <class T, class Emit>
void arg_reduce_as(const ArgReduceParams& p, const ArrayRef& in, Emit emit) {
  if (p.reduction != "max" && p.reduction != "min")
    throw ValueError("arg_reduce: unknown reduction \"" + p.reduction + "\"");
  const bool is_max = p.reduction == "max";
  const ArrayInfo& info = in->info();
  const std::string op = "arg" + p.reduction;
  const AxisView v = axis_view(info, p.axis, op);
  if (v.n == 0) throw ValueError(op + ": the axis of " + info.describe() + " is empty");
  const auto isz = static_cast<int64_t>(itemsize(info.dtype));
  const int64_t numel = info.numel();
  const int64_t carry_bytes = v.inner * static_cast<int64_t>(sizeof(T) + sizeof(int32_t));
  const int64_t block =
      plan_stream_block(op, info.describe(), numel, isz + static_cast<int64_t>(sizeof(T)),
                        carry_bytes, BlockBuffers{1, 1, isz});
  const int64_t n_tasks = numel == 0 ? 0 : (numel + block - 1) / block;
  auto reader = make_reader(in, info.shape, 0);
  StreamBuffers in_buf(block * isz + static_cast<int64_t>(kIoAlignment));
  std::vector<T> values(static_cast<size_t>(block)), best(static_cast<size_t>(v.inner));
  std::vector<int32_t> index(static_cast<size_t>(v.inner)), done;
  int64_t next_out = 0;
  auto range = [&](int64_t t) { return std::pair(t * block, std::min(block, numel - t * block)); };
  auto input = [&](int64_t t) { return in_buf.at(t) + reader->alignment_shift(range(t).first); };
  PipelineStages stages;
  stages.read = [&](int64_t t) {
    auto [first, count] = range(t);
    reader->read(first, count, input(t));
  };
  stages.compute = [&](int64_t t) {
    auto [first, count] = range(t);
    if constexpr (std::is_same_v<T, double>)
      load_doubles(info.dtype, input(t), count, values.data());
    else  // uint64_t: the int64 register values' bits
      load_ints(info.dtype, input(t), count, reinterpret_cast<int64_t*>(values.data()));
    LinePosition pos(v, first);
    for (int64_t i = 0; i < count; ++i, pos.next()) {
      const T x = values[static_cast<size_t>(i)];
      T& b = best[static_cast<size_t>(pos.q)];
      int32_t& at = index[static_cast<size_t>(pos.q)];
      if (pos.k == 0 || (!is_nan(b) && (is_nan(x) || (is_max ? x > b : x < b)))) {
        b = x;
        at = static_cast<int32_t>(pos.k);
      }
      if (pos.k == v.n - 1) done.push_back(at);
    }
    emit(next_out, static_cast<int64_t>(done.size()), done.data());
    next_out += static_cast<int64_t>(done.size());
    done.clear();
  };
  run_pipeline(n_tasks, stages);
}

template <class Emit>
void arg_reduce(const ArgReduceParams& p, const ArrayRef& in, Emit emit) {
  const DType dt = in->info().dtype;
  if (dtype_kind(dt) == DKind::kUnsigned)
    arg_reduce_as<uint64_t>(p, in, emit);
  else if (folds_as_int(dt))
    arg_reduce_as<int64_t>(p, in, emit);
  else
    arg_reduce_as<double>(p, in, emit);
}

ArrayInfo arg_reduce_info(const ArrayInfo& info, int64_t axis) {
  ArrayInfo out{DType::i32, {}};
  for (size_t d = 0; d < info.shape.size(); ++d)
    if (static_cast<int64_t>(d) != axis) out.shape.push_back(info.shape[d]);
  return out;
}

int32_t run_arg_reduce(const KernelCall& call, const ArgReduceParams& p) {
  expect_operands(call, 1, 0, 0);
  ArrayRef in = reg().get(call.operands.handles[0]);
  auto out = StoredArray::create_scratch(arg_reduce_info(in->info(), p.axis), "arg" + p.reduction,
                                         ScratchContents::kOverwritten);
  arg_reduce(p, in, [&](int64_t first, int64_t count, const int32_t* indices) {
    if (count) out->write_elems(indices, first, count);
  });
  return reg().add(out);
}
const KernelRegistration kArgReduce{"arg_reduce", kArgReduceSchema, run_arg_reduce};

void run_arg_reduce_in_memory(const KernelCall& call, const ArgReduceParams& p) {
  expect_operands(call, 1, 0, 0);
  ArrayRef in = reg().get(call.operands.handles[0]);
  const ArrayInfo out_info = arg_reduce_info(in->info(), p.axis);
  if (call.out.nbytes != out_info.nbytes()) {
    throw ValueError("arg_reduce: an output buffer of " + std::to_string(call.out.nbytes) +
                     " bytes does not hold " + out_info.describe());
  }
  auto* base = static_cast<int32_t*>(call.out.data);
  arg_reduce(p, in, [&](int64_t first, int64_t count, const int32_t* indices) {
    std::memcpy(base + first, indices, static_cast<size_t>(count) * sizeof(int32_t));
  });
}
const KernelRegistration kArgReduceInMemory{"arg_reduce", kArgReduceSchema,
                                            run_arg_reduce_in_memory};

}  // namespace
}  // namespace jask
