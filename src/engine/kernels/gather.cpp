#include "kernels/gather.hpp"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <span>
#include <string>
#include <vector>

#include "base/errors.hpp"
#include "call/registry.hpp"
#include "exec/pipeline.hpp"
#include "io/file.hpp"
#include "io/runs.hpp"
#include "kernels/kernels.hpp"
#include "plan/planner.hpp"
#include "program/reduction.hpp"
#include "storage/io_config.hpp"

namespace jask {
namespace {

// A zero-filled gap shorter than this is written through rather than ending
// a scatter block: one longer write costs less than another seek.
constexpr int64_t kScatterGapBytes = 1 << 20;

int64_t row_elems_of(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (size_t d = 1; d < shape.size(); ++d) n *= shape[d];
  return n;
}

std::string describe_indices(const RowIndices& idx) {
  return (idx.itemsize == 4 ? "int32[" : "int64[") + std::to_string(idx.count) + "]";
}

// Leading-axis rows for idx (see gather.hpp for the wrap-then-clamp rule).
std::vector<int64_t> normalized_rows(const RowIndices& idx, int64_t rows) {
  std::vector<int64_t> out(static_cast<size_t>(idx.count));
  const auto* p = static_cast<const unsigned char*>(idx.data);
  for (int64_t i = 0; i < idx.count; ++i) {
    int64_t v;
    if (idx.itemsize == 4) {
      int32_t v32;
      std::memcpy(&v32, p + i * 4, 4);
      v = v32;
    } else {
      std::memcpy(&v, p + i * 8, 8);
    }
    if (v < 0) v += rows;
    out[static_cast<size_t>(i)] = std::clamp<int64_t>(v, 0, rows - 1);
  }
  return out;
}

// Rows per block when each row needs `bytes_per_row` in every pipeline slot,
// held in `buffers` buffers per slot.
int64_t plan_row_block(const std::string& op, const std::string& operands, int64_t total_rows,
                       int64_t bytes_per_row, int64_t buffers) {
  const int64_t per_row = bytes_per_row * kPipelineSlots;
  if (per_row > memory_budget()) {
    throw ValueError("memory budget of " + std::to_string(memory_budget()) +
                     " bytes is too small for " + op + " on " + operands + ": it needs at least " +
                     std::to_string(per_row) + " bytes; raise it with jask.set_memory_budget(" +
                     std::to_string(per_row) + ")");
  }
  return std::clamp<int64_t>(units_within(memory_budget(), per_row, kPipelineSlots * buffers), 1,
                             std::max<int64_t>(total_rows, 1));
}

// Buffers of 0 bytes (a stream the op does not have) map nothing.
struct SlotBuffers {
  explicit SlotBuffers(int64_t bytes) {
    for (auto& s : slot) s = AlignedBuffer(static_cast<size_t>(bytes));
  }
  std::byte* at(int64_t i) { return slot[i % kPipelineSlots].data(); }
  AlignedBuffer slot[kPipelineSlots];
};

// Reads the distinct, sorted rows `sorted` of x packed into `dst`, one
// request per run of adjacent rows, many in flight (random rows are
// latency-bound one at a time). Chunked arrays are read run by run through
// their decode cache.
void read_row_runs(const StoredArray& x, int64_t row_elems, std::span<const int64_t> sorted,
                   std::byte* dst) {
  const int64_t row_bytes = row_elems * static_cast<int64_t>(itemsize(x.info().dtype));
  std::vector<ReadRun> runs;
  size_t i = 0;
  while (i < sorted.size()) {
    size_t j = i + 1;
    while (j < sorted.size() && sorted[j] == sorted[j - 1] + 1) ++j;
    std::byte* at = dst + static_cast<int64_t>(i) * row_bytes;
    const int64_t count = static_cast<int64_t>(j - i) * row_elems;
    if (x.chunked() != nullptr)
      x.read_elems(at, sorted[i] * row_elems, count);
    else
      runs.push_back(ReadRun{x.byte_of(sorted[i] * row_elems),
                             static_cast<size_t>(count) * itemsize(x.info().dtype), at});
    i = j;
  }
  if (!runs.empty()) read_runs(*x.file(), runs, io_policy());
}

// One block of a gather: the distinct source rows it needs, sorted (read in
// file order), and for each output row of the block which of them it copies.
struct GatherPlan {
  std::vector<int64_t> sources;
  std::vector<int64_t> source_of;
};

GatherPlan plan_gather_block(std::span<const int64_t> rows) {
  std::vector<int64_t> order(rows.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return rows[a] < rows[b]; });
  GatherPlan plan;
  plan.source_of.resize(rows.size());
  for (int64_t k : order) {
    if (plan.sources.empty() || plan.sources.back() != rows[k]) plan.sources.push_back(rows[k]);
    plan.source_of[k] = static_cast<int64_t>(plan.sources.size()) - 1;
  }
  return plan;
}

// Streams the gather in blocks of output rows: the reader thread reads each
// block's distinct source rows, the compute step copies them to their output
// rows (straight into `memory_out`, or into a slot that `array_out` gets).
void run_gather(const ArrayRef& x, const RowIndices& idx, std::byte* memory_out,
                const StoredArray* array_out) {
  const ArrayInfo& info = x->info();
  if (info.shape.empty())
    throw ValueError("take: " + info.describe() + " has no leading axis to index");
  const int64_t n = info.shape[0], row_elems = row_elems_of(info.shape);
  const int64_t row_bytes = row_elems * static_cast<int64_t>(itemsize(info.dtype));
  if (idx.count == 0 || row_bytes == 0) return;
  if (n == 0)
    throw ValueError("take: cannot take " + describe_indices(idx) + " rows of the empty " +
                     info.describe());
  const std::vector<int64_t> rows = normalized_rows(idx, n);
  const std::string operands = "take(" + info.describe() + ", " + describe_indices(idx) + ")";
  // Per output row of a block: its source row in the read slot, and its
  // output row in the write slot when the result goes to disk.
  const int64_t block = plan_row_block("take", operands, idx.count, row_bytes * (array_out ? 2 : 1),
                                       array_out ? 2 : 1);
  const int64_t n_tasks = (idx.count + block - 1) / block;
  auto range = [&](int64_t t) {
    return std::pair(t * block, std::min(block, idx.count - t * block));
  };
  SlotBuffers in(block * row_bytes), out(array_out ? block * row_bytes : 0);
  GatherPlan plans[kPipelineSlots];

  PipelineStages stages;
  stages.read = [&](int64_t t) {
    auto [first, count] = range(t);
    GatherPlan& plan = plans[t % kPipelineSlots];
    plan = plan_gather_block(std::span(rows).subspan(first, count));
    read_row_runs(*x, row_elems, plan.sources, in.at(t));
  };
  stages.compute = [&](int64_t t) {
    auto [first, count] = range(t);
    const GatherPlan& plan = plans[t % kPipelineSlots];
    std::byte* dst = array_out ? out.at(t) : memory_out + first * row_bytes;
    for (int64_t k = 0; k < count; ++k) {
      std::memcpy(dst + k * row_bytes, in.at(t) + plan.source_of[k] * row_bytes,
                  static_cast<size_t>(row_bytes));
    }
  };
  if (array_out) {
    stages.write = [&](int64_t t) {
      auto [first, count] = range(t);
      array_out->write_elems(out.at(t), first * row_elems, count * row_elems);
    };
  }
  run_pipeline(n_tasks, stages);
}

// acc[i] += src[i] for n elements: `src` in storage form, `acc` in the
// compute type (float for float32/16/bfloat16/float8, double for float64,
// int64 for integers and bool: exact, wrapping modulo 2^64, and
// narrow_in_place wraps the sums on to the dtype's width, as XLA's do).
void add_row(DType dt, const std::byte* src, std::byte* acc, int64_t n) {
  switch (dt) {
    case DType::f32: {
      auto* a = reinterpret_cast<float*>(acc);
      const auto* s = reinterpret_cast<const float*>(src);
      for (int64_t i = 0; i < n; ++i) a[i] += s[i];
      return;
    }
    case DType::f64: {
      auto* a = reinterpret_cast<double*>(acc);
      const auto* s = reinterpret_cast<const double*>(src);
      for (int64_t i = 0; i < n; ++i) a[i] += s[i];
      return;
    }
    case DType::f16:
    case DType::bf16: {
      auto* a = reinterpret_cast<float*>(acc);
      const auto* s = reinterpret_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i)
        a[i] += dt == DType::f16 ? f16_to_f32(s[i]) : bf16_to_f32(s[i]);
      return;
    }
    default: {
      // rows widened by the compute form's rules
      const size_t cs = compute_itemsize(dt), ss = itemsize(dt);
      thread_local std::vector<std::byte> row;
      row.resize(static_cast<size_t>(n) * cs);
      std::memcpy(row.data() + static_cast<size_t>(n) * (cs - ss), src,
                  static_cast<size_t>(n) * ss);
      widen_in_place(dt, row.data(), n);
      if (folds_as_int(dt)) {
        // uint64: the int64 values' bits, added without signed overflow
        auto* a = reinterpret_cast<uint64_t*>(acc);
        const auto* s = reinterpret_cast<const uint64_t*>(row.data());
        for (int64_t i = 0; i < n; ++i) a[i] += s[i];
      } else {
        auto* a = reinterpret_cast<float*>(acc);
        const auto* s = reinterpret_cast<const float*>(row.data());
        for (int64_t i = 0; i < n; ++i) a[i] += s[i];
      }
      return;
    }
  }
}

// One step of a scatter-add: entries [begin, end) of the index order, all
// landing in the output rows [first, first + count).
struct ScatterTask {
  int64_t first, count;  // the output block
  int64_t begin, end;    // entries, sorted by output row
  bool opens, closes;    // the block's first and last task
  int64_t acc;           // accumulator slot of the block
};

// Output blocks start at an entry's row and hold at most `block` rows; a
// gap of more than `gap_rows` rows without entries ends a block too, so
// rows far from every index are never written (a new file reads as zeros).
// Each block's entries are cut into tasks of at most `block` entries.
std::vector<ScatterTask> plan_scatter(std::span<const int64_t> sorted_rows, int64_t block,
                                      int64_t gap_rows) {
  std::vector<ScatterTask> tasks;
  int64_t blocks = 0;
  size_t e = 0;
  while (e < sorted_rows.size()) {
    const int64_t first = sorted_rows[e];
    size_t end = e + 1;
    while (end < sorted_rows.size() && sorted_rows[end] < first + block &&
           sorted_rows[end] - sorted_rows[end - 1] <= gap_rows) {
      ++end;
    }
    const int64_t count = sorted_rows[end - 1] - first + 1;
    for (size_t b = e; b < end; b += static_cast<size_t>(block)) {
      const size_t stop = std::min(end, b + static_cast<size_t>(block));
      tasks.push_back(ScatterTask{first, count, static_cast<int64_t>(b), static_cast<int64_t>(stop),
                                  b == e, stop == end, blocks % kPipelineSlots});
    }
    ++blocks;
    e = end;
  }
  return tasks;
}

}  // namespace

RowIndices row_indices(const std::string& op, const MemoryOperand& buffer, int64_t itemsize) {
  if (itemsize != 4 && itemsize != 8) {
    throw ValueError(op + ": indices must be int32 or int64, got " + std::to_string(itemsize) +
                     "-byte items");
  }
  if (buffer.nbytes % static_cast<uint64_t>(itemsize) != 0) {
    throw ValueError(op + ": an index buffer of " + std::to_string(buffer.nbytes) +
                     " bytes does not hold whole " + std::to_string(itemsize) + "-byte indices");
  }
  return RowIndices{buffer.data, static_cast<int64_t>(buffer.nbytes) / itemsize, itemsize};
}

void gather_rows_into(const ArrayRef& x, const RowIndices& idx, void* out, uint64_t nbytes) {
  const ArrayInfo& info = x->info();
  const uint64_t expected =
      static_cast<uint64_t>(idx.count * row_elems_of(info.shape)) * itemsize(info.dtype);
  if (info.shape.empty() || nbytes != expected) {
    throw ValueError("take: an output buffer of " + std::to_string(nbytes) +
                     " bytes does not hold " + std::to_string(idx.count) + " rows of " +
                     info.describe());
  }
  run_gather(x, idx, static_cast<std::byte*>(out), nullptr);
}

ArrayRef gather_rows(const ArrayRef& x, const RowIndices& idx,
                     const std::vector<int64_t>& out_shape) {
  const ArrayInfo& info = x->info();
  ArrayInfo out_info{info.dtype, out_shape};
  if (info.shape.empty() || out_info.numel() != idx.count * row_elems_of(info.shape)) {
    throw ValueError("take: " + out_info.describe() + " does not hold " +
                     std::to_string(idx.count) + " rows of " + info.describe());
  }
  auto out = StoredArray::create_scratch(out_info, "take");
  run_gather(x, idx, nullptr, out.get());
  return out;
}

ArrayRef scatter_add_rows(const ArrayInfo& info, const RowSource& rows, const RowIndices& idx) {
  if (info.shape.empty())
    throw ValueError("scatter_add_rows: " + info.describe() + " has no leading axis");
  const int64_t n = info.shape[0], row_elems = row_elems_of(info.shape);
  const int64_t row_bytes = row_elems * static_cast<int64_t>(itemsize(info.dtype));
  const std::string operands =
      "scatter_add_rows(" + info.describe() + ", " + describe_indices(idx) + ")";
  const uint64_t rows_bytes = rows.array ? rows.array->info().nbytes() : rows.nbytes;
  if (rows.array && rows.array->info().dtype != info.dtype) {
    throw TypeError(operands + ": the rows are " + rows.array->info().describe());
  }
  if (rows_bytes != static_cast<uint64_t>(idx.count * row_bytes)) {
    throw ValueError(operands + ": " + std::to_string(rows_bytes) + " bytes of rows do not make " +
                     std::to_string(idx.count) + " rows");
  }
  auto out = StoredArray::create_scratch(info, "scatter_add_rows");
  if (idx.count == 0 || row_bytes == 0) return out;
  if (n == 0) throw ValueError(operands + ": cannot add rows into an empty leading axis");

  // Entries sorted by output row (then by position, so sums are deterministic).
  const std::vector<int64_t> target = normalized_rows(idx, n);
  std::vector<int64_t> order(target.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return target[a] < target[b]; });
  std::vector<int64_t> sorted_rows(order.size());
  for (size_t i = 0; i < order.size(); ++i) sorted_rows[i] = target[order[i]];

  // Per block row: an accumulator row in the compute type, and one input
  // row in storage form when the rows come from disk.
  const int64_t acc_row = row_elems * static_cast<int64_t>(compute_itemsize(info.dtype));
  const int64_t block = plan_row_block("scatter_add_rows", operands, n,
                                       acc_row + (rows.array ? row_bytes : 0), rows.array ? 2 : 1);
  const auto tasks =
      plan_scatter(sorted_rows, block, std::max<int64_t>(1, kScatterGapBytes / row_bytes));
  SlotBuffers acc(block * acc_row), in(rows.array ? block * row_bytes : 0);
  // Per slot: the task's entries as (input row, output row in the block),
  // sorted by input row so disk rows are read in file order.
  std::vector<std::pair<int64_t, int64_t>> moves[kPipelineSlots];
  std::vector<int64_t> sources[kPipelineSlots];
  const auto* memory = static_cast<const std::byte*>(rows.memory);

  PipelineStages stages;
  stages.read = [&](int64_t t) {
    const ScatterTask& task = tasks[t];
    auto& mv = moves[t % kPipelineSlots];
    mv.clear();
    for (int64_t e = task.begin; e < task.end; ++e)
      mv.emplace_back(order[e], sorted_rows[e] - task.first);
    std::sort(mv.begin(), mv.end());
    if (!rows.array) return;
    auto& src = sources[t % kPipelineSlots];
    src.clear();
    for (const auto& m : mv) src.push_back(m.first);
    read_row_runs(*rows.array, row_elems, src, in.at(t));
  };
  stages.compute = [&](int64_t t) {
    const ScatterTask& task = tasks[t];
    std::byte* block_acc = acc.at(task.acc);
    if (task.opens) std::memset(block_acc, 0, static_cast<size_t>(task.count * acc_row));
    const auto& mv = moves[t % kPipelineSlots];
    for (size_t k = 0; k < mv.size(); ++k) {
      const std::byte* src = rows.array ? in.at(t) + static_cast<int64_t>(k) * row_bytes
                                        : memory + mv[k].first * row_bytes;
      add_row(info.dtype, src, block_acc + mv[k].second * acc_row, row_elems);
    }
    if (task.closes) narrow_in_place(info.dtype, block_acc, task.count * row_elems);
  };
  // A block's accumulator is reused two blocks later, whose first compute
  // waits for the writes two tasks back: this block's last write included.
  stages.write = [&](int64_t t) {
    const ScatterTask& task = tasks[t];
    if (task.closes)
      out->write_elems(acc.at(task.acc), task.first * row_elems, task.count * row_elems);
  };
  run_pipeline(static_cast<int64_t>(tasks.size()), stages);
  return out;
}

// -- the kernels' typed calls ----------------------------------------------------

namespace {

// take: operands x and the indices (in memory, index_itemsize bytes each, of index_shape).
struct TakeParams {
  int64_t index_itemsize = 0;
  std::vector<int64_t> index_shape;
};
const Schema<TakeParams> kTakeSchema{field("index_itemsize", &TakeParams::index_itemsize),
                                     field("index_shape", &TakeParams::index_shape)};

void run_take_in_memory(const KernelCall& call, const TakeParams& p) {
  expect_operands(call, 1, 0, 1);
  gather_rows_into(Registry::instance().get(call.operands.handles[0]),
                   row_indices("take", call.operands.memory[0], p.index_itemsize), call.out.data,
                   call.out.nbytes);
}
const KernelRegistration kTakeInMemory{"take", kTakeSchema, run_take_in_memory};

int32_t run_take(const KernelCall& call, const TakeParams& p) {
  expect_operands(call, 1, 0, 1);
  const RowIndices idx = row_indices("take", call.operands.memory[0], p.index_itemsize);
  ArrayRef x = Registry::instance().get(call.operands.handles[0]);
  std::vector<int64_t> out_shape = p.index_shape;
  for (size_t d = 1; d < x->info().shape.size(); ++d) out_shape.push_back(x->info().shape[d]);
  return Registry::instance().add(gather_rows(x, idx, out_shape));
}
const KernelRegistration kTake{"take", kTakeSchema, run_take};

// scatter_add_rows: operands the rows (an array, or in memory) and the indices
// (in memory); the result's dtype and shape.
struct ScatterAddParams {
  DType dtype = DType::f32;
  int64_t index_itemsize = 0;
  std::vector<int64_t> shape;
};
const Schema<ScatterAddParams> kScatterAddSchema{
    field("dtype", &ScatterAddParams::dtype),
    field("index_itemsize", &ScatterAddParams::index_itemsize),
    field("shape", &ScatterAddParams::shape)};

int32_t run_scatter_add_rows(const KernelCall& call, const ScatterAddParams& p) {
  const auto& ops = call.operands;
  const bool on_disk = ops.handles.size() == 1;
  expect_operands(call, on_disk ? 1 : 0, 0, on_disk ? 1 : 2);
  const RowIndices idx = row_indices("scatter_add_rows", ops.memory.back(), p.index_itemsize);
  RowSource rows;
  if (on_disk) {
    rows.array = Registry::instance().get(ops.handles[0]);
  } else {
    rows.memory = ops.memory[0].data;
    rows.nbytes = ops.memory[0].nbytes;
  }
  return Registry::instance().add(scatter_add_rows(ArrayInfo{p.dtype, p.shape}, rows, idx));
}
const KernelRegistration kScatterAddRows{"scatter_add_rows", kScatterAddSchema,
                                         run_scatter_add_rows};

}  // namespace

}  // namespace jask
