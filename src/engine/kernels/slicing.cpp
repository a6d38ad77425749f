#include "kernels/slicing.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/errors.hpp"
#include "call/registry.hpp"
#include "exec/pipeline.hpp"
#include "io/file.hpp"
#include "plan/planner.hpp"
#include "program/program.hpp"
#include "storage/readahead.hpp"

namespace jask {
namespace {

// Runs of a slice closer than this in the file are read with one request,
// the gap included: reading a few more bytes costs less than another request.
constexpr int64_t kGapBytes = 16 << 10;
// Parts of a placement whose reads land at their file offset's alignment in
// memory (one page of slack each), so that they can bypass the page cache.
constexpr int64_t kAlignedParts = 8;

int64_t product(const std::vector<int64_t>& v) {
  int64_t n = 1;
  for (int64_t d : v) n *= d;
  return n;
}

// A selection over the fewest axes that visit the same elements in the same
// order: trailing axes taken whole merge into the axis before them when it
// has step 1 (x[2:5] on (n, k, m) is one run of 3*k*m elements). The last
// axis has element stride 1; runs of the walk are runs along it.
struct Walk {
  std::vector<int64_t> shape;  // the array's, axes merged
  Selection sel;
  std::vector<int64_t> stride;  // element strides of the array
  int64_t numel = 0;            // elements selected

  int last() const { return static_cast<int>(sel.size()) - 1; }

  // The selected elements are one run of the array.
  bool contiguous() const {
    for (int d = 0; d < last(); ++d)
      if (sel[d].count != 1) return false;
    return sel[last()].step == 1;
  }

  int64_t first_position() const {
    int64_t p = 0;
    for (size_t d = 0; d < sel.size(); ++d) p += sel[d].start * stride[d];
    return p;
  }

  // Selected elements before array position p, in selection order (for
  // positive steps, where that order is also the order in the array).
  int64_t rank(int64_t p) const {
    if (numel == 0) return 0;
    if (p >= product(shape)) return numel;
    std::vector<int64_t> idx(shape.size());
    for (int d = last(); d >= 0; --d) {
      idx[d] = p % shape[d];
      p /= shape[d];
    }
    int64_t r = 0, inner = numel;
    for (size_t d = 0; d < sel.size(); ++d) {
      const AxisSlice& s = sel[d];
      inner /= s.count;
      const int64_t i = idx[d];
      const int64_t below =
          i <= s.start ? 0 : std::min(s.count, (i - s.start + s.step - 1) / s.step);
      r += below * inner;
      const bool selected =
          i >= s.start && (i - s.start) % s.step == 0 && (i - s.start) / s.step < s.count;
      if (!selected) break;
    }
    return r;
  }

  // Calls fn(array position, step, length, offset in the selection) for the
  // runs along the last axis that cover selected elements [first, first + count).
  template <class Fn>
  void for_each_run(int64_t first, int64_t count, Fn fn) const {
    if (count <= 0) return;
    const int L = last();
    std::vector<int64_t> idx(sel.size());
    int64_t rest = first;
    for (int d = L; d >= 0; --d) {
      idx[d] = rest % sel[d].count;
      rest /= sel[d].count;
    }
    int64_t row = 0;  // array position of the current row's element 0 of the last axis
    for (int d = 0; d < L; ++d) row += (sel[d].start + sel[d].step * idx[d]) * stride[d];
    const AxisSlice& inner = sel[L];
    for (int64_t done = 0; done < count;) {
      const int64_t n = std::min(inner.count - idx[L], count - done);
      fn(row + inner.start + inner.step * idx[L], inner.step, n, done);
      done += n;
      idx[L] += n;
      if (idx[L] < inner.count) continue;
      idx[L] = 0;
      for (int d = L - 1; d >= 0; --d) {  // odometer step
        row += sel[d].step * stride[d];
        if (++idx[d] < sel[d].count) break;
        row -= sel[d].step * stride[d] * sel[d].count;
        idx[d] = 0;
      }
    }
  }
};

Walk make_walk(std::vector<int64_t> shape, Selection sel) {
  if (shape.empty()) {  // a 0-d array: one element
    shape = {1};
    sel = {{0, 1, 1}};
  }
  for (auto& s : sel) {
    if (s.count <= 1)
      s = {s.count == 0 ? 0 : s.start, 1, s.count};  // the step of one index is moot
  }
  int d = static_cast<int>(sel.size()) - 2;
  int64_t inner_shape = shape.back();
  AxisSlice inner = sel.back();
  for (; d >= 0; --d) {
    const bool whole = inner.start == 0 && inner.step == 1 && inner.count == inner_shape;
    if (!whole || sel[d].step != 1) break;
    inner = {sel[d].start * inner_shape, 1, sel[d].count * inner_shape};
    inner_shape *= shape[d];
  }
  Walk w;
  w.shape.assign(shape.begin(), shape.begin() + d + 1);
  w.shape.push_back(inner_shape);
  w.sel.assign(sel.begin(), sel.begin() + d + 1);
  w.sel.push_back(inner);
  w.stride.assign(w.shape.size(), 1);
  for (int e = w.last() - 1; e >= 0; --e) w.stride[e] = w.stride[e + 1] * w.shape[e + 1];
  w.numel = 1;
  for (const auto& s : w.sel) w.numel *= s.count;
  return w;
}

// dst[j] = src[step * j] for j < n, elements of `isz` bytes.
void copy_strided(std::byte* dst, const std::byte* src, int64_t step, int64_t n, size_t isz) {
  if (step == 1) {
    std::memcpy(dst, src, static_cast<size_t>(n) * isz);
    return;
  }
  for (int64_t j = 0; j < n; ++j)
    std::memcpy(dst + j * static_cast<int64_t>(isz), src + step * j * static_cast<int64_t>(isz),
                isz);
}

// dst[step * j] = src[j] for j < n.
void scatter_strided(std::byte* dst, int64_t step, const std::byte* src, int64_t n, size_t isz) {
  if (step == 1) {
    std::memcpy(dst, src, static_cast<size_t>(n) * isz);
    return;
  }
  for (int64_t j = 0; j < n; ++j)
    std::memcpy(dst + step * j * static_cast<int64_t>(isz), src + j * static_cast<int64_t>(isz),
                isz);
}

// Reads strided runs of an array (elements pos + step * j, j < n) into
// destinations in memory. Runs close together in the file are read with one
// request into a scratch buffer and copied out; long runs go straight to
// their destination. Destinations stay pending until flush().
class RunReader {
 public:
  // Uses `memory` bytes at most: the scratch buffer and the list of pending runs.
  RunReader(const StoredArray& array, int64_t memory)
      : array_(array), isz_(itemsize(array.info().dtype)) {
    max_runs_ =
        static_cast<size_t>(std::max<int64_t>(1, memory / (4 * static_cast<int64_t>(sizeof(Run)))));
    const int64_t scratch = memory - static_cast<int64_t>(max_runs_ * sizeof(Run));
    capacity_ = std::max<int64_t>(1, scratch / static_cast<int64_t>(isz_));
    gap_ = kGapBytes / static_cast<int64_t>(isz_);
    scratch_ = AlignedBuffer(static_cast<size_t>(capacity_) * isz_);
    runs_.reserve(max_runs_);
  }

  void add(int64_t pos, int64_t step, int64_t n, std::byte* dst) {
    if (n <= 0) return;
    if (n == 1) step = 1;
    const int64_t stride = step < 0 ? -step : step;
    const int64_t isz = static_cast<int64_t>(isz_);
    if (stride - 1 > gap_) {  // elements far apart: each its own request
      for (int64_t j = 0; j < n; ++j) add(pos + step * j, 1, 1, dst + j * isz);
      return;
    }
    const int64_t span = (n - 1) * stride + 1;
    if (span > capacity_) {
      if (step == 1) {
        flush();
        array_.read_elems(dst, pos, n);
        return;
      }
      const int64_t per = (capacity_ - 1) / stride + 1;  // elements whose span fits the scratch
      for (int64_t j = 0; j < n; j += per)
        add(pos + step * j, step, std::min(per, n - j), dst + j * isz);
      return;
    }
    const int64_t lo = step > 0 ? pos : pos + step * (n - 1);
    if (!runs_.empty() &&
        (lo < hi_ || lo - hi_ > gap_ || lo + span - lo_ > capacity_ || runs_.size() == max_runs_)) {
      flush();
    }
    if (runs_.empty()) lo_ = lo;
    hi_ = lo + span;
    runs_.push_back({pos, step, n, dst});
  }

  void flush() {
    if (runs_.empty()) return;
    if (runs_.size() == 1 && runs_[0].step == 1) {
      array_.read_elems(runs_[0].dst, runs_[0].pos, runs_[0].n);
    } else {
      array_.read_elems(scratch_.data(), lo_, hi_ - lo_);
      for (const Run& r : runs_) {
        copy_strided(r.dst, scratch_.data() + (r.pos - lo_) * static_cast<int64_t>(isz_), r.step,
                     r.n, isz_);
      }
    }
    runs_.clear();
  }

 private:
  struct Run {
    int64_t pos, step, n;
    std::byte* dst;
  };
  const StoredArray& array_;
  size_t isz_;
  size_t max_runs_;
  int64_t capacity_;  // scratch elements
  int64_t gap_;       // elements
  AlignedBuffer scratch_;
  std::vector<Run> runs_;
  int64_t lo_ = 0, hi_ = 0;  // array elements [lo, hi) cover the pending runs
};

// dst[0..n) = value in dtype's storage form.
void fill_elements(DType dtype, double value, std::byte* dst, int64_t n) {
  if (n <= 0) return;
  const Program constant{1, dtype, Reduction::kNone, 0, {}, {}};
  ProgramRunner runner(constant, {}, {value});
  runner.run({}, dst, 1);
  const int64_t isz = static_cast<int64_t>(itemsize(dtype));
  for (int64_t done = 1; done < n;) {  // doubling copies of the first element
    const int64_t m = std::min(done, n - done);
    std::memcpy(dst + done * isz, dst, static_cast<size_t>(m * isz));
    done += m;
  }
}

// Memory a slice's RunReader may use.
int64_t reader_memory() { return memory_budget() / 4; }

std::string describe_slice(const ArrayInfo& info, const Selection& sel) {
  std::string s = "slice(" + info.describe() + ", [";
  for (size_t d = 0; d < sel.size(); ++d) {
    if (d) s += ", ";
    s += std::to_string(sel[d].start) + ":" +
         std::to_string(sel[d].start + sel[d].step * sel[d].count) + ":" +
         std::to_string(sel[d].step);
  }
  return s + "])";
}

}  // namespace

void check_selection(const std::string& op, const ArrayInfo& info, const Selection& sel) {
  if (sel.size() != info.shape.size()) {
    throw ValueError(op + ": a selection of " + std::to_string(sel.size()) + " axes for " +
                     info.describe());
  }
  for (size_t d = 0; d < sel.size(); ++d) {
    const AxisSlice& s = sel[d];
    if (s.count < 0 || (s.step == 0 && s.count > 1)) {
      throw ValueError(op + ": invalid selection (start " + std::to_string(s.start) + ", step " +
                       std::to_string(s.step) + ", count " + std::to_string(s.count) +
                       ") on axis " + std::to_string(d) + " of " + info.describe());
    }
    if (s.count == 0) continue;
    const int64_t last = s.start + s.step * (s.count - 1);
    for (int64_t i : {s.start, last}) {
      if (i < 0 || i >= info.shape[d]) {
        throw ValueError(op + ": index " + std::to_string(i) + " is out of bounds for axis " +
                         std::to_string(d) + " with size " + std::to_string(info.shape[d]) +
                         " of " + info.describe());
      }
    }
  }
}

std::vector<int64_t> selected_shape(const Selection& sel) {
  std::vector<int64_t> shape;
  for (const auto& s : sel) shape.push_back(s.count);
  return shape;
}

ArrayRef slice_array(const ArrayRef& x, const Selection& sel) {
  check_selection("slice", x->info(), sel);
  const ArrayInfo out_info{x->info().dtype, selected_shape(sel)};
  const Walk walk = make_walk(x->info().shape, sel);
  if (walk.numel > 0 && walk.contiguous())
    return StoredArray::viewed(x, walk.first_position(), out_info.shape);

  auto out = StoredArray::create_scratch(out_info, "slice");
  const int64_t isz = static_cast<int64_t>(itemsize(out_info.dtype));
  const int64_t memory = reader_memory();
  const int64_t block = plan_stream_block("slice", describe_slice(x->info(), sel), walk.numel, isz,
                                          memory, BlockBuffers{1, 0, isz});
  RunReader reader(*x, memory);
  AlignedBuffer slots[kPipelineSlots];
  for (auto& s : slots) s = AlignedBuffer(static_cast<size_t>(block * isz));
  auto slot = [&](int64_t t) { return slots[t % kPipelineSlots].data(); };
  auto range = [&](int64_t t) {
    return std::pair(t * block, std::min(block, walk.numel - t * block));
  };

  // The gather runs in the compute stage, straight into the output slot (free
  // once write(t - 2) ended), while the writer writes the block before.
  PipelineStages stages;
  stages.read = [](int64_t) {};
  stages.compute = [&](int64_t t) {
    auto [first, count] = range(t);
    std::byte* dst = slot(t);
    walk.for_each_run(first, count, [&](int64_t pos, int64_t step, int64_t n, int64_t offset) {
      reader.add(pos, step, n, dst + offset * isz);
    });
    reader.flush();
  };
  stages.write = [&](int64_t t) {
    auto [first, count] = range(t);
    out->write_elems(slot(t), first, count);
  };
  run_pipeline((walk.numel + block - 1) / block, stages);
  return out;
}

void slice_into(const ArrayRef& x, const Selection& sel, void* dst, uint64_t nbytes) {
  check_selection("slice", x->info(), sel);
  const ArrayInfo out_info{x->info().dtype, selected_shape(sel)};
  if (nbytes != out_info.nbytes()) {
    throw ValueError(describe_slice(x->info(), sel) + ": the output buffer has " +
                     std::to_string(nbytes) + " bytes, the selection " + out_info.describe() +
                     " needs " + std::to_string(out_info.nbytes()));
  }
  const Walk walk = make_walk(x->info().shape, sel);
  const int64_t isz = static_cast<int64_t>(itemsize(out_info.dtype));
  auto* out = static_cast<std::byte*>(dst);
  RunReader reader(*x, reader_memory());
  walk.for_each_run(0, walk.numel, [&](int64_t pos, int64_t step, int64_t n, int64_t offset) {
    reader.add(pos, step, n, out + offset * isz);
  });
  reader.flush();
}

ArrayRef place_arrays(const ArrayInfo& info, const std::vector<Placement>& parts,
                      const Background& background) {
  std::string desc = "place(" + info.describe();
  if (background.base && (background.base->info().dtype != info.dtype ||
                          background.base->info().shape != info.shape)) {
    throw ValueError("place: the base " + background.base->info().describe() + " is not " +
                     info.describe());
  }
  const bool zero_background =
      !background.base && background.fill == 0.0 && !std::signbit(background.fill);
  std::vector<Walk> walks;
  int64_t on_disk = 0;
  for (const Placement& p : parts) {
    check_selection("place", info, p.selection);
    for (const AxisSlice& s : p.selection) {
      if (s.step <= 0 && s.count > 1) throw ValueError("place: selections need positive steps");
    }
    const ArrayInfo values{info.dtype, selected_shape(p.selection)};
    if (p.array) {
      if (p.array->info().dtype != info.dtype || p.array->info().shape != values.shape) {
        throw ValueError("place: values " + p.array->info().describe() +
                         " do not match the selection " + values.describe() + " of " +
                         info.describe());
      }
      ++on_disk;
    }
    desc += ", " + values.describe();
    walks.push_back(make_walk(info.shape, p.selection));
  }
  desc += ")";

  auto out = StoredArray::create_scratch(info, "place");
  const int64_t numel = info.numel();
  const int64_t isz = static_cast<int64_t>(itemsize(info.dtype));
  // Parts read at their file offset's alignment (direct) take a page more each, in every
  // slot: at most a quarter of the budget's pages.
  const int64_t aligned_parts =
      std::min({on_disk, kAlignedParts,
                memory_budget() / (4 * kPipelineSlots * static_cast<int64_t>(kIoAlignment))});
  // Per element of a block: the parts' values, the output and the base, in every slot.
  const int64_t block =
      plan_stream_block("place", desc, numel, (background.base ? 3 : 2) * isz, 0,
                        BlockBuffers{background.base ? 3 : 2, aligned_parts, isz});
  struct Span {
    int64_t lo = 0, hi = 0;  // the part's elements that land in the block
    const std::byte* values = nullptr;
  };
  struct Slot {
    AlignedBuffer in, out, base;
    std::vector<Span> spans;
    int64_t covered = 0;  // elements of the block the parts reach (set by read)
    bool write = false;   // set by compute: read(t + 2) may run during write(t)
  };
  Slot slots[kPipelineSlots];
  for (auto& s : slots) {
    s.in = AlignedBuffer(
        static_cast<size_t>(block * isz + aligned_parts * static_cast<int64_t>(kIoAlignment)));
    s.out = AlignedBuffer(static_cast<size_t>(block * isz));
    if (background.base) s.base = AlignedBuffer(static_cast<size_t>(block * isz));
    s.spans.resize(parts.size());
  }
  auto range = [&](int64_t t) { return std::pair(t * block, std::min(block, numel - t * block)); };

  PipelineStages stages;
  stages.read = [&](int64_t t) {
    auto [first, count] = range(t);
    Slot& s = slots[t % kPipelineSlots];
    int64_t cursor = 0, total = 0, aligned = 0;
    for (size_t k = 0; k < parts.size(); ++k) {
      Span& span = s.spans[k];
      span.lo = walks[k].rank(first);
      span.hi = walks[k].rank(first + count);
      total += span.hi - span.lo;
      if (total > count) throw ValueError(desc + ": the parts' selections overlap");
      if (!parts[k].array) {
        span.values = static_cast<const std::byte*>(parts[k].data) + span.lo * isz;
        continue;
      }
      if (span.hi == span.lo) continue;
      if (aligned < aligned_parts) {  // land at the file offset's alignment
        const int64_t offset = static_cast<int64_t>(parts[k].array->byte_of(span.lo));
        const int64_t page = static_cast<int64_t>(kIoAlignment);
        cursor += ((offset - cursor) % page + page) % page;
        ++aligned;
      }
      parts[k].array->read_elems(s.in.data() + cursor, span.lo, span.hi - span.lo);
      span.values = s.in.data() + cursor;
      cursor += (span.hi - span.lo) * isz;
    }
    s.covered = total;
    if (background.base && total < count) background.base->read_elems(s.base.data(), first, count);
  };
  stages.compute = [&](int64_t t) {  // the output slot is free here (write(t - 2) ended)
    auto [first, count] = range(t);
    Slot& s = slots[t % kPipelineSlots];
    s.write = s.covered > 0 || !zero_background;  // blocks no part reaches stay sparse zeros
    if (!s.write) return;
    if (s.covered < count) {
      if (background.base)
        std::memcpy(s.out.data(), s.base.data(), static_cast<size_t>(count * isz));
      else
        fill_elements(info.dtype, background.fill, s.out.data(), count);
    }
    for (size_t k = 0; k < parts.size(); ++k) {
      const Span& span = s.spans[k];
      walks[k].for_each_run(
          span.lo, span.hi - span.lo, [&](int64_t pos, int64_t step, int64_t n, int64_t offset) {
            scatter_strided(s.out.data() + (pos - first) * isz, step, span.values + offset * isz, n,
                            static_cast<size_t>(isz));
          });
    }
  };
  stages.write = [&](int64_t t) {
    auto [first, count] = range(t);
    const Slot& s = slots[t % kPipelineSlots];
    if (s.write) out->write_elems(s.out.data(), first, count);
  };
  run_pipeline((numel + block - 1) / block, stages);
  return out;
}

// -- the kernels' typed calls ----------------------------------------------------

namespace {

// Axis d selects start[d], start[d] + step[d], ..., count[d] indices.
struct SliceParams {
  std::vector<int64_t> start, step, count;
};
const Schema<SliceParams> kSliceSchema{field("start", &SliceParams::start),
                                       field("step", &SliceParams::step),
                                       field("count", &SliceParams::count)};

// A slice whose starts are the scalar operands (traced indices: lax.dynamic_slice),
// clamped so that the selection stays inside x; steps 1.
struct DynamicSliceParams {
  std::vector<int64_t> count;
};
const Schema<DynamicSliceParams> kDynamicSliceSchema{field("count", &DynamicSliceParams::count)};

// Axes [first, first + rank) of the parallel start/step/count fields.
Selection selection_of(const std::string& kernel, const SliceParams& p, size_t first, size_t rank) {
  if (p.step.size() != p.start.size() || p.count.size() != p.start.size()) {
    reject_field(kernel, "start", "step and count differ in length");
  }
  if (p.start.size() < first + rank) {
    reject_field(kernel, "start",
                 "has " + std::to_string(p.start.size()) + " entries, fewer than " +
                     std::to_string(first + rank));
  }
  Selection sel(rank);
  for (size_t d = 0; d < rank; ++d)
    sel[d] = {p.start[first + d], p.step[first + d], p.count[first + d]};
  return sel;
}

// The scalar operands from `first` on as the starts of `sel` (one per axis),
// each clamped so that the selection stays inside `shape`, as XLA clamps a
// dynamic slice's starts; the selection's steps must be 1.
void clamp_dynamic_starts(const KernelCall& call, size_t first, const std::vector<int64_t>& shape,
                          Selection& sel) {
  const auto& scalars = call.operands.scalars;
  if (scalars.size() != first + sel.size()) {
    throw ValueError(call.kernel + ": " + std::to_string(sel.size()) +
                     " dynamic starts need as many scalar operands after the first " +
                     std::to_string(first) + ", got " + std::to_string(scalars.size()));
  }
  for (size_t d = 0; d < sel.size(); ++d) {
    if (sel[d].step != 1) reject_field(call.kernel, "step", "must be 1 with dynamic starts");
    const double start =
        std::clamp(scalars[first + d], 0.0,
                   static_cast<double>(std::max<int64_t>(0, shape[d] - sel[d].count)));
    sel[d].start = sel[d].count == 0 ? 0 : static_cast<int64_t>(start);
  }
}

Selection slice_selection(const KernelCall& call, const SliceParams& p, const ArrayRef& x) {
  const size_t rank = x->info().shape.size();
  if (p.start.size() != rank) {
    reject_field(call.kernel, "start",
                 "needs one entry for each of the " + std::to_string(rank) + " axes of " +
                     x->info().describe() + ", got " + std::to_string(p.start.size()));
  }
  return selection_of(call.kernel, p, 0, rank);
}

int32_t run_slice(const KernelCall& call, const SliceParams& p) {
  expect_operands(call, 1, 0, 0);
  ArrayRef x = Registry::instance().get(call.operands.handles[0]);
  return Registry::instance().add(slice_array(x, slice_selection(call, p, x)));
}
const KernelRegistration kSlice{"slice", kSliceSchema, run_slice};

void run_slice_in_memory(const KernelCall& call, const SliceParams& p) {
  expect_operands(call, 1, 0, 0);
  ArrayRef x = Registry::instance().get(call.operands.handles[0]);
  slice_into(x, slice_selection(call, p, x), call.out.data, call.out.nbytes);
}
const KernelRegistration kSliceInMemory{"slice", kSliceSchema, run_slice_in_memory};

Selection dynamic_selection(const KernelCall& call, const DynamicSliceParams& p,
                            const ArrayRef& x) {
  const auto& shape = x->info().shape;
  if (p.count.size() != shape.size()) {
    reject_field(call.kernel, "count",
                 "needs one entry for each of the " + std::to_string(shape.size()) + " axes of " +
                     x->info().describe());
  }
  Selection sel(shape.size());
  for (size_t d = 0; d < shape.size(); ++d) {
    if (p.count[d] < 0 || p.count[d] > shape[d]) {
      reject_field(call.kernel, "count",
                   "selects " + std::to_string(p.count[d]) + " of axis " + std::to_string(d) +
                       " of " + x->info().describe());
    }
    sel[d] = {0, 1, p.count[d]};
  }
  clamp_dynamic_starts(call, 0, shape, sel);
  return sel;
}

int32_t run_dynamic_slice(const KernelCall& call, const DynamicSliceParams& p) {
  ArrayRef x = Registry::instance().get(call.operands.handles.at(0));
  expect_operands(call, 1, x->info().shape.size(), 0);
  return Registry::instance().add(slice_array(x, dynamic_selection(call, p, x)));
}
const KernelRegistration kDynamicSlice{"dynamic_slice", kDynamicSliceSchema, run_dynamic_slice};

// Whole rows of the leading axis into a buffer of exactly their bytes.
bool whole_rows_into(const ArrayInfo& info, const Selection& sel, uint64_t nbytes) {
  int64_t row = 1;
  for (size_t d = 1; d < sel.size(); ++d) {
    if (sel[d].start != 0 || sel[d].count != info.shape[d]) return false;
    row *= info.shape[d];
  }
  return !sel.empty() && nbytes == static_cast<uint64_t>(sel[0].count * row) * itemsize(info.dtype);
}

void run_dynamic_slice_in_memory(const KernelCall& call, const DynamicSliceParams& p) {
  ArrayRef x = Registry::instance().get(call.operands.handles.at(0));
  expect_operands(call, 1, x->info().shape.size(), 0);
  const Selection sel = dynamic_selection(call, p, x);
  if (!whole_rows_into(x->info(), sel, call.out.nbytes))
    return slice_into(x, sel, call.out.data, call.out.nbytes);
  // lax.dynamic_slice_in_dim in a loop finds the next rows read already (storage/readahead.hpp).
  const int64_t row = sel[0].count == 0 ? 0 : x->info().numel() / x->info().shape[0];
  read_elems_ahead(*x, call.out.data, sel[0].start * row, sel[0].count * row);
}
const KernelRegistration kDynamicSliceInMemory{"dynamic_slice", kDynamicSliceSchema,
                                               run_dynamic_slice_in_memory};

// The output's dtype and shape; part k (on disk, or in memory where
// in_memory[k]) goes to the selection at axes [k * rank, (k + 1) * rank) of
// start/step/count. The background: where `base`, the first array operand
// (of the output's type); where `fill`, the first scalar operand; else zeros.
// Where `dynamic`, the last part's starts are the scalar operands after the
// fill (clamped into the output). Parts on disk are the array operands after
// the base, in order; parts in memory the in-memory operands.
struct PlaceParams {
  DType dtype = DType::f32;
  std::vector<int64_t> shape, in_memory, start, step, count;
  bool base = false, fill = false, dynamic = false;
};
const Schema<PlaceParams> kPlaceSchema{
    field("dtype", &PlaceParams::dtype),         field("shape", &PlaceParams::shape),
    field("in_memory", &PlaceParams::in_memory), field("start", &PlaceParams::start),
    field("step", &PlaceParams::step),           field("count", &PlaceParams::count),
    field("base", &PlaceParams::base),           field("fill", &PlaceParams::fill),
    field("dynamic", &PlaceParams::dynamic)};

int32_t run_place(const KernelCall& call, const PlaceParams& p) {
  const ArrayInfo info{p.dtype, p.shape};
  const size_t rank = p.shape.size();
  std::vector<Placement> parts;
  size_t handle = 0, buffer = 0;
  const auto& ops = call.operands;
  Background background;
  if (p.base) {
    if (ops.handles.empty()) throw ValueError("place: no array operand for the base");
    background.base = Registry::instance().get(ops.handles[handle++]);
  }
  if (p.fill) {
    if (ops.scalars.empty()) throw ValueError("place: no scalar operand for the fill value");
    background.fill = ops.scalars[0];
  }
  if (p.dynamic && p.in_memory.empty()) reject_field(call.kernel, "dynamic", "needs a part");
  if (!p.dynamic && ops.scalars.size() != (p.fill ? 1u : 0u))
    throw ValueError("place: more scalar operands than a fill value");
  const SliceParams selections{p.start, p.step, p.count};
  for (size_t k = 0; k < p.in_memory.size(); ++k) {
    Placement part;
    part.selection = selection_of(call.kernel, selections, k * rank, rank);
    if (p.dynamic && k + 1 == p.in_memory.size())
      clamp_dynamic_starts(call, p.fill ? 1 : 0, p.shape, part.selection);
    if (p.in_memory[k] != 0) {
      if (buffer >= ops.memory.size())
        throw ValueError("place: fewer in-memory operands than parts in memory");
      const MemoryOperand& b = ops.memory[buffer++];
      const ArrayInfo values{p.dtype, selected_shape(part.selection)};
      if (b.nbytes != values.nbytes()) {
        throw ValueError("place: an in-memory part of " + std::to_string(b.nbytes) +
                         " bytes does not match " + values.describe());
      }
      part.data = b.data;
    } else {
      if (handle >= ops.handles.size())
        throw ValueError("place: fewer array operands than parts on disk");
      part.array = Registry::instance().get(ops.handles[handle++]);
    }
    parts.push_back(std::move(part));
  }
  if (p.start.size() != p.in_memory.size() * rank) {
    reject_field(call.kernel, "start", "does not hold one selection per part");
  }
  if (handle != ops.handles.size() || buffer != ops.memory.size()) {
    throw ValueError("place: more operands than parts");
  }
  return Registry::instance().add(place_arrays(info, parts, background));
}
const KernelRegistration kPlace{"place", kPlaceSchema, run_place};

}  // namespace

}  // namespace jask
