// Sorting along the last axis, one row in memory at a time, rows streamed in
// blocks: `argsort_rows` finds each row's permutation (int32 indices), and
// `take_along_rows` / `put_along_rows` apply a permutation and its inverse to
// any array of the same rows (sorted values, and the derivatives of sort and
// top_k). Other axes are moved last by the caller (a transpose).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <numeric>
#include <string>
#include <type_traits>
#include <vector>

#include "base/errors.hpp"
#include "call/registry.hpp"
#include "exec/pipeline.hpp"
#include "kernels/along_axis.hpp"
#include "plan/planner.hpp"
#include "program/reduction.hpp"
#include "storage/array_store.hpp"

namespace jask {
namespace {

Registry& reg() { return Registry::instance(); }

int64_t row_length(const ArrayInfo& info) { return info.shape.empty() ? 1 : info.shape.back(); }

// The leading extents (every axis but the last) of `info`.
std::vector<int64_t> leading_shape(const ArrayInfo& info) {
  if (info.shape.empty()) return {};
  return {info.shape.begin(), info.shape.end() - 1};
}

// Streams row blocks: `inputs[i]` holds `in_row[i]` elements per row, `out`
// (of `out_row` elements per row) is written behind; `work_per_row` bytes of
// working memory per row are counted against the budget too. `compute(first,
// count, in, out)` gets each block's rows.
using RowsFn = std::function<void(int64_t first, int64_t count, const std::vector<std::byte*>& in,
                                  std::byte* out)>;
void stream_rows(const std::string& op, const std::vector<ArrayRef>& inputs,
                 const std::vector<int64_t>& in_row, const StoredArray& out, int64_t out_row,
                 int64_t work_per_row, int64_t rows, const RowsFn& compute) {
  std::string operands;
  int64_t row_bytes = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    operands += (i ? ", " : "") + inputs[i]->info().describe();
    row_bytes += in_row[i] * static_cast<int64_t>(itemsize(inputs[i]->info().dtype));
  }
  const auto out_isz = static_cast<int64_t>(itemsize(out.info().dtype));
  row_bytes += out_row * out_isz;
  const int64_t per_row = kPipelineSlots * row_bytes + work_per_row;
  const int64_t block =
      std::min(rows, units_within(memory_budget(), per_row,
                                  kPipelineSlots * (static_cast<int64_t>(inputs.size()) + 1)));
  if (rows > 0 && block < 1) {
    throw ValueError(op + "(" + operands + "): one row needs " + std::to_string(per_row) +
                     " bytes, more than the memory budget of " + std::to_string(memory_budget()) +
                     " bytes; raise the budget to at least " + std::to_string(per_row));
  }
  std::vector<StreamBuffers> in_bufs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    in_bufs.emplace_back(block * in_row[i] *
                         static_cast<int64_t>(itemsize(inputs[i]->info().dtype)));
  }
  StreamBuffers out_buf(block * out_row * out_isz);
  const int64_t n_tasks = rows == 0 ? 0 : (rows + block - 1) / block;
  auto range = [&](int64_t t) { return std::pair(t * block, std::min(block, rows - t * block)); };
  PipelineStages stages;
  stages.read = [&](int64_t t) {
    auto [first, count] = range(t);
    for (size_t i = 0; i < inputs.size(); ++i)
      inputs[i]->read_elems(in_bufs[i].at(t), first * in_row[i], count * in_row[i]);
  };
  stages.compute = [&](int64_t t) {
    auto [first, count] = range(t);
    std::vector<std::byte*> in;
    for (auto& b : in_bufs) in.push_back(b.at(t));
    compute(first, count, in, out_buf.at(t));
  };
  stages.write = [&](int64_t t) {
    auto [first, count] = range(t);
    out.write_elems(out_buf.at(t), first * out_row, count * out_row);
  };
  run_pipeline(n_tasks, stages);
}

// The order of lax.sort: NaN after everything, all NaNs equal; -0.0 == 0.0.
bool sorts_before(double a, double b) { return a == a && (b != b || a < b); }

// The order lax.top_k ranks by: IEEE 754 totalOrder, -NaN < -inf < ... < -0.0 < 0.0 < ... <
// inf < NaN (NaNs of one sign equal).
bool total_order_before(double a, double b) {
  auto nan_side = [](double v) { return v != v ? (std::signbit(v) ? -1 : 1) : 0; };
  const int sa = nan_side(a), sb = nan_side(b);
  if (sa != sb) return sa < sb;
  if (sa != 0) return false;
  if (a == b) return std::signbit(a) && !std::signbit(b);
  return a < b;
}

struct ArgsortParams {
  bool descending = false;  // lax.top_k's order (totalOrder, largest first), else lax.sort's
  int64_t keep = 0;         // the first `keep` indices of each row's order
};
const Schema<ArgsortParams> kArgsortSchema{field("descending", &ArgsortParams::descending),
                                           field("keep", &ArgsortParams::keep)};

// Each row's stable sorting permutation by the keys (lexicographic, the first
// key primary), in lax.sort's order or lax.top_k's, truncated to `keep` indices.
int32_t run_argsort_rows(const KernelCall& call, const ArgsortParams& p) {
  if (call.operands.handles.empty() || !call.operands.scalars.empty() ||
      !call.operands.memory.empty())
    throw ValueError("argsort_rows: expects one or more arrays on disk (the keys)");
  std::vector<ArrayRef> keys;
  for (int32_t h : call.operands.handles) keys.push_back(reg().get(h));
  const ArrayInfo& info = keys[0]->info();
  for (const ArrayRef& k : keys) {
    if (k->info().shape != info.shape)
      throw ValueError("argsort_rows: keys of different shapes: " + info.describe() + " and " +
                       k->info().describe());
  }
  const int64_t n = row_length(info);
  if (p.keep < 0 || p.keep > n)
    throw ValueError("argsort_rows: cannot keep " + std::to_string(p.keep) + " of " +
                     std::to_string(n) + " elements per row of " + info.describe());
  ArrayInfo out_info{DType::i32, leading_shape(info)};
  out_info.shape.push_back(p.keep);
  auto out = StoredArray::create_scratch(out_info, "argsort", ScratchContents::kOverwritten);
  const int64_t rows = n == 0 ? 0 : info.numel() / n;
  const auto nk = static_cast<int64_t>(keys.size());
  // Integer keys compare exactly as int64 (or uint64) register values, beside the doubles of
  // float keys: a double cannot tell int64s past 2^53 apart.
  std::vector<DKind> kind(static_cast<size_t>(nk));
  bool any_int = false;
  for (int64_t k = 0; k < nk; ++k) {
    const DType dt = keys[k]->info().dtype;
    kind[k] = !folds_as_int(dt) ? DKind::kFloat : dtype_kind(dt);
    any_int = any_int || folds_as_int(dt);
  }
  const int64_t slots = any_int ? 2 * nk : nk;  // doubles, and int64s for integer keys
  const int64_t work =
      n * (slots * static_cast<int64_t>(sizeof(double)) + static_cast<int64_t>(sizeof(int32_t)));
  std::vector<double> values(static_cast<size_t>(nk * n));
  std::vector<int64_t> int_values(any_int ? static_cast<size_t>(nk * n) : 0);
  int64_t* ints = int_values.data();
  std::vector<int32_t> order(static_cast<size_t>(n));
  // -1, 0, 1: key k of element i before, tied with, after element j's (in the sort's order).
  auto compare = [&]<bool kAnyInt>(int64_t k, int32_t i, int32_t j) -> int {
    const auto at = static_cast<size_t>(k * n);
    if constexpr (kAnyInt) {
      if (kind[k] != DKind::kFloat) {
        const int64_t a = ints[at + i], b = ints[at + j];
        const bool less = kind[k] == DKind::kSigned ? a < b : uint64_t(a) < uint64_t(b);
        const bool more = kind[k] == DKind::kSigned ? b < a : uint64_t(b) < uint64_t(a);
        return p.descending ? (more ? -1 : less ? 1 : 0) : (less ? -1 : more ? 1 : 0);
      }
    }
    const double a = values[at + i], b = values[at + j];
    if (p.descending ? total_order_before(b, a) : sorts_before(a, b)) return -1;
    if (p.descending ? total_order_before(a, b) : sorts_before(b, a)) return 1;
    return 0;
  };
  auto before_as = [&]<bool kAnyInt>(int32_t i, int32_t j) {
    for (int64_t k = 0; k < nk; ++k) {
      const int c = compare.template operator()<kAnyInt>(k, i, j);
      if (c != 0) return c < 0;
    }
    return i < j;  // ties by position: a strict total order, so any sort of it is stable
  };
  auto sort_as = [&]<bool kAnyInt>() {
    auto before = [&](int32_t i, int32_t j) {
      return before_as.template operator()<kAnyInt>(i, j);
    };
    if (p.keep == n) {
      std::sort(order.begin(), order.end(), before);
    } else {
      std::partial_sort(order.begin(), order.begin() + p.keep, order.end(), before);
    }
  };
  stream_rows("sort", keys, std::vector<int64_t>(keys.size(), n), *out, p.keep, work, rows,
              [&](int64_t, int64_t count, const std::vector<std::byte*>& in, std::byte* dst) {
                auto* indices = reinterpret_cast<int32_t*>(dst);
                for (int64_t r = 0; r < count; ++r) {
                  for (int64_t k = 0; k < nk; ++k) {
                    const DType dt = keys[k]->info().dtype;
                    const auto isz = static_cast<int64_t>(itemsize(dt));
                    if (kind[k] == DKind::kFloat)
                      load_doubles(dt, in[k] + r * n * isz, n, values.data() + k * n);
                    else
                      load_ints(dt, in[k] + r * n * isz, n, ints + k * n);
                  }
                  std::iota(order.begin(), order.end(), 0);
                  if (any_int)
                    sort_as.template operator()<true>();
                  else
                    sort_as.template operator()<false>();
                  std::copy_n(order.begin(), p.keep, indices + r * p.keep);
                }
              });
  return reg().add(out);
}
const KernelRegistration kArgsortRows{"argsort_rows", kArgsortSchema, run_argsort_rows};

// The indices of a row permutation, checked against the row length `n`.
void check_indices(const std::string& op, const int32_t* indices, int64_t count, int64_t n) {
  for (int64_t j = 0; j < count; ++j) {
    if (indices[j] < 0 || indices[j] >= n) {
      throw ValueError(op + ": index " + std::to_string(indices[j]) +
                       " is out of range for rows of " + std::to_string(n) + " elements");
    }
  }
}

void check_rows(const std::string& op, const ArrayInfo& data, const ArrayInfo& indices) {
  if (indices.dtype != DType::i32 || leading_shape(data) != leading_shape(indices))
    throw ValueError(op + ": the indices " + indices.describe() + " do not match the rows of " +
                     data.describe());
}

// out[..., j] = data[..., indices[..., j]].
int32_t run_take_along_rows(const KernelCall& call, const NoParams&) {
  expect_operands(call, 2, 0, 0);
  ArrayRef data = reg().get(call.operands.handles[0]);
  ArrayRef indices = reg().get(call.operands.handles[1]);
  check_rows("take_along_rows", data->info(), indices->info());
  const int64_t n = row_length(data->info()), k = row_length(indices->info());
  ArrayInfo out_info{data->info().dtype, indices->info().shape};
  auto out =
      StoredArray::create_scratch(out_info, "take_along_rows", ScratchContents::kOverwritten);
  const int64_t rows = k == 0 ? 0 : indices->info().numel() / k;
  const size_t isz = itemsize(out_info.dtype);
  stream_rows("take_along_rows", {data, indices}, {n, k}, *out, k, 0, rows,
              [&](int64_t, int64_t count, const std::vector<std::byte*>& in, std::byte* dst) {
                for (int64_t r = 0; r < count; ++r) {
                  const std::byte* row = in[0] + static_cast<size_t>(r * n) * isz;
                  const auto* idx = reinterpret_cast<const int32_t*>(in[1]) + r * k;
                  check_indices("take_along_rows", idx, k, n);
                  std::byte* to = dst + static_cast<size_t>(r * k) * isz;
                  for (int64_t j = 0; j < k; ++j)
                    std::memcpy(to + static_cast<size_t>(j) * isz,
                                row + static_cast<size_t>(idx[j]) * isz, isz);
                }
              });
  return reg().add(out);
}
const KernelRegistration kTakeAlongRows{"take_along_rows", Schema<NoParams>{}, run_take_along_rows};

struct PutAlongRowsParams {
  int64_t length = 0;  // the output rows' length
};
const Schema<PutAlongRowsParams> kPutAlongRowsSchema{field("length", &PutAlongRowsParams::length)};

// out[..., indices[..., j]] += values[..., j] over zeros: the transpose of
// take_along_rows (indices may repeat: a running argmax's do).
int32_t run_put_along_rows(const KernelCall& call, const PutAlongRowsParams& p) {
  expect_operands(call, 2, 0, 0);
  ArrayRef values = reg().get(call.operands.handles[0]);
  ArrayRef indices = reg().get(call.operands.handles[1]);
  check_rows("put_along_rows", values->info(), indices->info());
  if (values->info().shape != indices->info().shape)
    throw ValueError("put_along_rows: the values " + values->info().describe() + " and indices " +
                     indices->info().describe() + " differ in shape");
  const int64_t k = row_length(values->info()), n = p.length;
  const DType dt = values->info().dtype;
  ArrayInfo out_info{dt, leading_shape(values->info())};
  out_info.shape.push_back(n);
  auto out = StoredArray::create_scratch(out_info, "put_along_rows", ScratchContents::kOverwritten);
  const int64_t rows = n == 0 ? 0 : out_info.numel() / n;
  const auto isz = static_cast<int64_t>(itemsize(dt));
  // Sums in double for floats, in int64 for integers (exact; wrapped to the dtype's width).
  auto put = [&]<class Acc>(Acc zero) {
    const int64_t work = (n + k) * static_cast<int64_t>(sizeof(Acc));
    std::vector<Acc> from(static_cast<size_t>(k)), sums(static_cast<size_t>(n));
    stream_rows("put_along_rows", {values, indices}, {k, k}, *out, n, work, rows,
                [&](int64_t, int64_t count, const std::vector<std::byte*>& in, std::byte* dst) {
                  for (int64_t r = 0; r < count; ++r) {
                    load_folded(dt, in[0] + r * k * isz, k, from.data());
                    const auto* idx = reinterpret_cast<const int32_t*>(in[1]) + r * k;
                    check_indices("put_along_rows", idx, k, n);
                    std::fill(sums.begin(), sums.end(), zero);
                    for (int64_t j = 0; j < k; ++j) {
                      Acc& sum = sums[static_cast<size_t>(idx[j])];
                      if constexpr (std::is_same_v<Acc, double>)
                        sum += from[static_cast<size_t>(j)];
                      else
                        sum =
                            IntFold<Reduction::kSum, int64_t>{}(sum, from[static_cast<size_t>(j)]);
                    }
                    store_folded(sums.data(), n, dt, dst + r * n * isz);
                  }
                });
  };
  if (folds_as_int(dt))
    put(int64_t{0});
  else
    put(0.0);
  return reg().add(out);
}
const KernelRegistration kPutAlongRows{"put_along_rows", kPutAlongRowsSchema, run_put_along_rows};

}  // namespace
}  // namespace jask
