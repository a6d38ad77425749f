#include "kernels/ops.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <optional>
#include <thread>
#include <type_traits>

#include "base/concurrency.hpp"
#include "base/errors.hpp"
#include "call/registry.hpp"
#include "exec/pipeline.hpp"
#include "kernels/along_axis.hpp"
#include "kernels/batched_matmul.hpp"
#include "kernels/kernels.hpp"
#include "plan/planner.hpp"
#include "program/broadcast.hpp"
#include "program/program.hpp"
#include "storage/chunked.hpp"
#include "storage/hyperslab.hpp"
#include "storage/readahead.hpp"
#include "storage/transaction.hpp"

namespace jask {
namespace {

Registry& reg() { return Registry::instance(); }

std::string describe_call(const std::string& name, const std::vector<ArrayRef>& arrays) {
  std::string s = name + "(";
  for (size_t i = 0; i < arrays.size(); ++i) {
    if (i) s += ", ";
    s += arrays[i]->info().describe();
  }
  return s + ")";
}

std::vector<ArrayRef> lookup(const std::vector<int32_t>& handles) {
  std::vector<ArrayRef> out;
  out.reserve(handles.size());
  for (int32_t h : handles) out.push_back(reg().get(h));
  return out;
}

void check_same_layout(const std::string& name, const std::vector<ArrayRef>& arrays) {
  for (size_t i = 1; i < arrays.size(); ++i) {
    const ArrayInfo& a = arrays[0]->info();
    const ArrayInfo& b = arrays[i]->info();
    if (a.dtype != b.dtype) {
      throw TypeError(name + ": dtypes differ: " + a.describe() + " and " + b.describe());
    }
    if (a.shape != b.shape) {
      throw ValueError(name + ": shapes differ: " + a.describe() + " and " + b.describe());
    }
  }
}

// Streams the flat elements of `inputs` (and `output`, if any) in blocks.
// `compute(task, input blocks, output block, first, count)` runs on the
// calling thread while the next block is read and the previous written.
using BlockFn = std::function<void(int64_t task, const std::vector<const void*>& in, void* out,
                                   int64_t first, int64_t count)>;

// Streams `numel` output elements in blocks: each reader fills its input
// block (operands broadcast to the output), `compute` runs on the calling
// thread while the next blocks are read and the previous ones written (to
// every output; a fused program may have several).
using MultiBlockFn =
    std::function<void(int64_t task, const std::vector<const void*>& in,
                       const std::vector<void*>& out, int64_t first, int64_t count)>;

// The smallest of the streams' element sizes (1 for none).
int64_t smallest_itemsize(const std::vector<int64_t>& in_size,
                          const std::vector<int64_t>& out_size) {
  int64_t least = 0;
  for (const auto* sizes : {&in_size, &out_size})
    for (int64_t s : *sizes) least = least == 0 ? s : std::min(least, s);
  return std::max<int64_t>(least, 1);
}

void stream_blocks_to(const std::string& op, const std::string& operands, int64_t numel,
                      const std::vector<const OperandReader*>& readers,
                      const std::vector<int64_t>& in_size, int64_t resident_bytes,
                      const std::vector<const StoredArray*>& outputs, const MultiBlockFn& compute) {
  int64_t bytes_per_elem = 0;
  for (int64_t s : in_size) bytes_per_elem += s;
  std::vector<int64_t> out_size;
  for (const StoredArray* o : outputs) {
    out_size.push_back(static_cast<int64_t>(itemsize(o->info().dtype)));
    bytes_per_elem += out_size.back();
  }
  const int64_t block = plan_stream_block(
      op, operands, numel, std::max<int64_t>(bytes_per_elem, 1), resident_bytes,
      BlockBuffers{static_cast<int64_t>(readers.size() + outputs.size()),
                   static_cast<int64_t>(readers.size()), smallest_itemsize(in_size, out_size)});
  std::vector<StreamBuffers> in_bufs;
  in_bufs.reserve(readers.size());
  // One page of slack per slot lets a block land at its file offset's
  // alignment (see OperandReader::alignment_shift).
  for (size_t i = 0; i < readers.size(); ++i)
    in_bufs.emplace_back(block * in_size[i] + kIoAlignment);
  std::vector<StreamBuffers> out_bufs;
  out_bufs.reserve(outputs.size());
  for (int64_t size : out_size) out_bufs.emplace_back(block * size);
  const int64_t n_tasks = numel == 0 ? 0 : (numel + block - 1) / block;
  auto range = [&](int64_t t) { return std::pair(t * block, std::min(block, numel - t * block)); };
  auto input_block = [&](size_t i, int64_t t) {
    return in_bufs[i].at(t) + readers[i]->alignment_shift(range(t).first);
  };

  PipelineStages stages;
  stages.read = [&](int64_t t) {
    auto [first, count] = range(t);
    // Operands are read at the same time: a disk serves several streams
    // faster than one (each read is also split, see File::read_at).
    run_concurrently(readers.size(),
                     [&](size_t i) { readers[i]->read(first, count, input_block(i, t)); });
  };
  stages.compute = [&](int64_t t) {
    auto [first, count] = range(t);
    std::vector<const void*> in(readers.size());
    for (size_t i = 0; i < readers.size(); ++i) in[i] = input_block(i, t);
    std::vector<void*> out(outputs.size());
    for (size_t o = 0; o < outputs.size(); ++o) out[o] = out_bufs[o].at(t);
    compute(t, in, out, first, count);
  };
  if (!outputs.empty()) {
    stages.write = [&](int64_t t) {
      auto [first, count] = range(t);
      // All outputs at once, as the reads: one after another, each waiting
      // for its slowest part, kept fewer writes in flight than reads.
      run_concurrently(outputs.size(),
                       [&](size_t o) { outputs[o]->write_elems(out_bufs[o].at(t), first, count); });
    };
  }
  run_pipeline(n_tasks, stages);
}

void stream_blocks(const std::string& op, const std::string& operands, int64_t numel,
                   const std::vector<const OperandReader*>& readers,
                   const std::vector<int64_t>& in_size, int64_t resident_bytes,
                   const StoredArray* output, const BlockFn& compute) {
  std::vector<const StoredArray*> outputs;
  if (output) outputs.push_back(output);
  stream_blocks_to(op, operands, numel, readers, in_size, resident_bytes, outputs,
                   [&](int64_t t, const std::vector<const void*>& in, const std::vector<void*>& out,
                       int64_t first,
                       int64_t count) { compute(t, in, output ? out[0] : nullptr, first, count); });
}

// The same for arrays of the output's shape.
void stream_elements(const std::string& op, const std::string& operands, int64_t numel,
                     const std::vector<ArrayRef>& inputs, const StoredArray* output,
                     const BlockFn& compute, int64_t resident_bytes = 0) {
  std::vector<std::unique_ptr<OperandReader>> owned;
  std::vector<const OperandReader*> readers;
  std::vector<int64_t> in_size;
  for (const auto& a : inputs) {
    owned.push_back(make_reader(a, a->info().shape, 0));
    readers.push_back(owned.back().get());
    in_size.push_back(static_cast<int64_t>(itemsize(a->info().dtype)));
  }
  stream_blocks(op, operands, numel, readers, in_size, resident_bytes, output, compute);
}

// The operands of an elementwise program: arrays on disk, then in-memory
// arrays, all broadcast to the output shape.
struct ProgramOperands {
  std::vector<std::unique_ptr<OperandReader>> readers;
  std::vector<DType> dtypes;
  std::string description;

  std::vector<const OperandReader*> views() const {
    std::vector<const OperandReader*> out;
    for (const auto& r : readers) out.push_back(r.get());
    return out;
  }
  std::vector<int64_t> itemsizes() const {
    std::vector<int64_t> out;
    for (DType dt : dtypes) out.push_back(static_cast<int64_t>(itemsize(dt)));
    return out;
  }
  int64_t resident_bytes() const {
    int64_t total = 0;
    for (const auto& r : readers) total += r->resident_bytes();
    return total;
  }
};

int64_t numel_of(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// `out_bytes_per_elem`: what the outputs' blocks take per element (0 for a reduction).
ProgramOperands program_operands(const ProgramCall& call, int64_t out_bytes_per_elem) {
  ProgramOperands ops;
  for (int64_t d : call.out_shape) {
    if (d < 0) throw ValueError(call.name + ": negative extent in the output shape");
  }
  // Operands that do not broadcast to the output: name the call.
  auto named = [&](auto make_reader_fn) {
    try {
      return make_reader_fn();
    } catch (const ValueError& e) {
      throw ValueError(ops.description + ": " + e.what());
    }
  };
  auto arrays = lookup(call.handles);
  ops.description = describe_call(call.name, arrays);
  // Small operands are kept whole in memory: a quarter of the budget for all of them.
  int64_t resident_pool = memory_budget() / 4;
  for (const auto& a : arrays) {
    ops.readers.push_back(named([&] { return make_reader(a, call.out_shape, resident_pool); }));
    resident_pool -= ops.readers.back()->resident_bytes();
    ops.dtypes.push_back(a->info().dtype);
  }
  for (const MemoryArray& m : call.memory) {
    ArrayInfo info{m.dtype, m.shape};
    if (info.nbytes() != m.bytes.nbytes) {
      throw ValueError(call.name + ": an in-memory operand of " + std::to_string(m.bytes.nbytes) +
                       " bytes does not hold " + info.describe());
    }
    ops.readers.push_back(
        named([&] { return make_memory_reader(m.bytes.data, m.dtype, m.shape, call.out_shape); }));
    ops.dtypes.push_back(m.dtype);
  }
  // At a very small budget the operands kept whole can leave no room for the
  // blocks: then every array operand is read per block instead.
  int64_t bytes_per_elem = out_bytes_per_elem;
  for (int64_t size : ops.itemsizes()) bytes_per_elem += size;
  if (ops.resident_bytes() > 0 &&
      !stream_fits(numel_of(call.out_shape), bytes_per_elem, ops.resident_bytes())) {
    for (size_t i = 0; i < arrays.size(); ++i)
      ops.readers[i] = make_reader(arrays[i], call.out_shape, 0);
  }
  return ops;
}

// The call's program, its errors naming the op.
Program build_program(const ProgramCall& call) {
  try {
    return Program::build(call.code, call.handles.size() + call.memory.size(), call.scalars.size());
  } catch (const ValueError& e) {
    throw ValueError(call.name + ": " + e.what());
  }
}

// Cores an elementwise block is split over: the reader and writer threads
// mostly wait on direct I/O, so on a small machine one compute thread left
// the other core idle while a long program (an adam step) bounded the pass.
size_t compute_threads() { return std::clamp<size_t>(std::thread::hardware_concurrency(), 1, 4); }

// runners[k] evaluates the k-th consecutive share of the block's `count`
// elements (elementwise: the results are the same however it is cut).
void run_split(std::vector<ProgramRunner>& runners, const std::vector<const void*>& in,
               const std::vector<int64_t>& in_size, const std::vector<void*>& out, int64_t out_size,
               int64_t count) {
  constexpr int64_t kMinShare = 1 << 16;  // elements: below this a thread costs more than it saves
  const int64_t parts = std::clamp<int64_t>(count / kMinShare, 1, std::ssize(runners));
  if (parts == 1) return runners[0].run(in, out, count);
  const int64_t share = (count / parts + 4095) / 4096 * 4096;
  run_concurrently(static_cast<size_t>(parts), [&](size_t k) {
    const int64_t first = std::min(count, static_cast<int64_t>(k) * share);
    const int64_t n = std::min(count, first + share) - first;
    std::vector<const void*> in_k(in.size());
    for (size_t i = 0; i < in.size(); ++i)
      in_k[i] = static_cast<const std::byte*>(in[i]) + first * in_size[i];
    std::vector<void*> out_k(out.size());
    for (size_t o = 0; o < out.size(); ++o)
      out_k[o] = static_cast<std::byte*>(out[o]) + first * out_size;
    if (n > 0) runners[k].run(in_k, out_k, n);
  });
}

}  // namespace

std::vector<int32_t> map_program_outputs(const ProgramCall& call) {
  // One output's blocks: with several, a budget too small for all of them runs one pass each
  // (below).
  ProgramOperands ops = program_operands(call, static_cast<int64_t>(sizeof(double)));
  Program program = build_program(call);
  const std::string& name = call.name;
  if (program.reduction != Reduction::kNone)
    throw ValueError(name + ": program ends in a reduction");
  ArrayInfo info{program.out_dtype, call.out_shape};
  std::vector<ArrayRef> outs;
  std::vector<const StoredArray*> targets;
  for (size_t o = 0; o < program.n_outputs(); ++o) {
    outs.push_back(StoredArray::create_scratch(info, name, ScratchContents::kOverwritten));
    targets.push_back(outs.back().get());
  }
  auto run = [&](const Program& p, const std::vector<const StoredArray*>& to) {
    std::vector<ProgramRunner> runners;
    runners.reserve(compute_threads());
    for (size_t k = 0; k < compute_threads(); ++k)
      runners.emplace_back(p, ops.dtypes, call.scalars);
    const std::vector<int64_t> in_size = ops.itemsizes();
    const auto out_size = static_cast<int64_t>(itemsize(info.dtype));
    stream_blocks_to(
        name, ops.description, info.numel(), ops.views(), in_size, ops.resident_bytes(), to,
        [&](int64_t, const std::vector<const void*>& in, const std::vector<void*>& dst, int64_t,
            int64_t count) { run_split(runners, in, in_size, dst, out_size, count); });
  };
  int64_t bytes_per_elem = static_cast<int64_t>(targets.size() * itemsize(info.dtype));
  for (int64_t size : ops.itemsizes()) bytes_per_elem += size;
  if (targets.size() == 1 || stream_fits(info.numel(), bytes_per_elem, ops.resident_bytes())) {
    run(program, targets);
  } else {
    // A budget too small for every output's buffers at once: one pass per
    // output (each recomputes what it needs), rather than failing.
    for (size_t o = 0; o < targets.size(); ++o) {
      Program single = program;
      single.out_reg = o == 0 ? program.out_reg : program.more_out_regs[o - 1];
      single.more_out_regs.clear();
      run(single, {targets[o]});
    }
  }
  std::vector<int32_t> handles_out;
  for (auto& o : outs) handles_out.push_back(reg().add(o));
  return handles_out;
}

int32_t map_program(const ProgramCall& call) {
  if (call.code.out_regs.size() != 1) {
    throw ValueError(call.name + ": a program with " + std::to_string(call.code.out_regs.size()) +
                     " outputs needs the map_multi kernel");
  }
  return map_program_outputs(call)[0];
}

double reduce_program(const ProgramCall& call) {
  ProgramOperands ops = program_operands(call, 0);
  Program program = build_program(call);
  if (program.reduction == Reduction::kNone)
    throw ValueError(call.name + ": program has no reduction");
  ProgramRunner runner(program, ops.dtypes, call.scalars);
  stream_blocks(call.name, ops.description, numel_of(call.out_shape), ops.views(), ops.itemsizes(),
                ops.resident_bytes(), nullptr,
                [&](int64_t, const std::vector<const void*>& in, void*, int64_t, int64_t count) {
                  runner.run(in, nullptr, count);
                });
  return runner.reduced();
}

ArrayRef transposed(const ArrayRef& in, const std::vector<int64_t>& perm);

namespace {

// The reduction of chosen axes of one array, delivered to `emit(first,
// count, values)` in output order. Results that fit a quarter of the budget
// accumulate in memory; larger ones need the reduced axes to be trailing,
// so that each output element is one contiguous run of the input.
class AxisReducer {
 public:
  AxisReducer(ArrayRef in, const std::vector<int64_t>& axes, Reduction kind)
      : in_(std::move(in)), kind_(kind) {
    const auto& shape = in_->info().shape;
    const int nd = static_cast<int>(shape.size());
    reduced_.assign(nd, false);
    for (int64_t a : axes) {
      if (a < 0 || a >= nd || reduced_[a]) {
        throw ValueError("reduce: invalid axes for " + in_->info().describe());
      }
      reduced_[a] = true;
    }
    for (int d = 0; d < nd; ++d)
      if (!reduced_[d]) out_shape_.push_back(shape[d]);
    out_numel_ = 1;
    for (int64_t d : out_shape_) out_numel_ *= d;
    // output strides in input index space (0 along reduced axes)
    out_strides_.assign(nd, 0);
    int64_t s = 1;
    for (int d = nd - 1; d >= 0; --d) {
      if (!reduced_[d]) {
        out_strides_[d] = s;
        s *= shape[d];
      }
    }
  }

  const std::vector<int64_t>& out_shape() const { return out_shape_; }

  // Calls emit(first, count, values) with the results in output order: `values` are doubles
  // for a float array, int64 register values for an integer or bool one (store_folded).
  template <class Emit>
  void run(const std::string& name, Emit emit) {
    const DType dt = in_->info().dtype;
    if (folds_as_int(dt)) {
      with_int_fold(kind_, dt, [&](auto fold) {
        run_with(name, Folding<int64_t, decltype(fold)>{int_identity(kind_, dt), fold}, emit);
      });
    } else {
      with_reduction(kind_, [&](auto r) {
        constexpr size_t kRow = decltype(r)::value;
        run_with(name, Folding<double, TableFold<kRow>>{kReductions[kRow].identity, {}}, emit);
      });
    }
  }

 private:
  // An accumulator type's identity and fold: (double, a row of kReductions) for floats,
  // (int64_t, IntFold) for integers.
  template <class Acc, class Fold>
  struct Folding {
    Acc identity;
    Fold fold;
  };

  template <class F, class Emit>
  void run_with(const std::string& name, F f, Emit emit) {
    using Acc = decltype(f.identity);
    const int64_t resident = out_numel_ * static_cast<int64_t>(sizeof(Acc));
    if (resident <= memory_budget() / 4) return run_resident(name, f, emit);
    if (!trailing()) {
      // Too large to accumulate in memory: move the reduced axes last (one
      // out-of-core transpose), then each output element is a contiguous run.
      std::vector<int64_t> perm;
      for (size_t d = 0; d < reduced_.size(); ++d)
        if (!reduced_[d]) perm.push_back(static_cast<int64_t>(d));
      for (size_t d = 0; d < reduced_.size(); ++d)
        if (reduced_[d]) perm.push_back(static_cast<int64_t>(d));
      std::vector<int64_t> trailing_axes;
      for (size_t d = out_shape_.size(); d < perm.size(); ++d)
        trailing_axes.push_back(static_cast<int64_t>(d));
      AxisReducer moved(transposed(in_, perm), trailing_axes, kind_);
      return moved.run_trailing(name, f, emit);
    }
    run_trailing(name, f, emit);
  }

  bool trailing() const {
    bool seen = false;
    for (bool r : reduced_) {
      if (r)
        seen = true;
      else if (seen)
        return false;
    }
    return true;
  }
  // Calls each(values, n) on the `count` storage elements at `src` in the
  // accumulator type, a few thousand at a time: a whole block's would be
  // up to eight times its size, outside the budget the block was planned in.
  template <class Acc, class Each>
  void widen(const void* src, int64_t count, Each each) const {
    constexpr int64_t kPiece = 4096;
    const DType dt = in_->info().dtype;
    Program copy{1 + 1, DType::f64, Reduction::kNone, 1, {Instr{Opcode::kCopy, 1, 0, 0, 0}}, {}};
    std::optional<ProgramRunner> runner;
    if constexpr (std::is_same_v<Acc, double>)
      runner.emplace(copy, std::vector<DType>{dt}, std::vector<double>{});
    Acc values[kPiece];
    const auto* bytes = static_cast<const std::byte*>(src);
    for (int64_t start = 0; start < count; start += kPiece) {
      const int64_t n = std::min(kPiece, count - start);
      const std::byte* piece = bytes + start * static_cast<int64_t>(itemsize(dt));
      if constexpr (std::is_same_v<Acc, double>)
        runner->run({piece}, values, n);
      else
        load_ints(dt, piece, n, values);
      each(static_cast<const Acc*>(values), n);
    }
  }

  template <class F, class Emit>
  void run_resident(const std::string& name, F f, Emit emit) {
    using Acc = decltype(f.identity);
    std::vector<Acc> acc(static_cast<size_t>(out_numel_), f.identity);
    const auto& shape = in_->info().shape;
    const int nd = static_cast<int>(shape.size());
    stream_elements(
        name, in_->info().describe(), in_->info().numel(), {in_}, nullptr,
        [&](int64_t, const std::vector<const void*>& in, void*, int64_t first, int64_t count) {
          std::vector<int64_t> idx(nd);
          int64_t rest = first, o = 0;
          for (int d = nd - 1; d >= 0; --d) {
            idx[d] = rest % shape[d];
            rest /= shape[d];
            o += idx[d] * out_strides_[d];
          }
          widen<Acc>(in[0], count, [&](const Acc* values, int64_t n) {
            for (int64_t i = 0; i < n; ++i) {
              Acc& a = acc[static_cast<size_t>(o)];
              a = f.fold(a, values[i]);
              for (int d = nd - 1; d >= 0; --d) {  // odometer step
                o += out_strides_[d];
                if (++idx[d] < shape[d]) break;
                o -= out_strides_[d] * shape[d];
                idx[d] = 0;
              }
            }
          });
        },
        static_cast<int64_t>(acc.size() * sizeof(Acc)));
    if (out_numel_ > 0) emit(0, out_numel_, acc.data());
  }

  template <class F, class Emit>
  void run_trailing(const std::string& name, F f, Emit emit) {
    using Acc = decltype(f.identity);
    const int64_t run = in_->info().numel() / std::max<int64_t>(out_numel_, 1);
    std::vector<Acc> done;
    int64_t next_out = 0;
    Acc acc = f.identity;
    stream_elements(
        name, in_->info().describe(), in_->info().numel(), {in_}, nullptr,
        [&](int64_t, const std::vector<const void*>& in, void*, int64_t first, int64_t count) {
          int64_t at = first;
          widen<Acc>(in[0], count, [&](const Acc* values, int64_t n) {
            for (int64_t i = 0; i < n; ++i) {
              acc = f.fold(acc, values[i]);
              if (++at % run == 0) {
                done.push_back(acc);
                acc = f.identity;
              }
            }
          });
          emit(next_out, static_cast<int64_t>(done.size()), done.data());
          next_out += static_cast<int64_t>(done.size());
          done.clear();
        });
  }

  ArrayRef in_;
  Reduction kind_;
  std::vector<bool> reduced_;
  std::vector<int64_t> out_shape_, out_strides_;
  int64_t out_numel_;
};

AxisReducer axis_reducer(int32_t handle, int64_t reduction, const std::vector<int64_t>& axes) {
  return AxisReducer(reg().get(handle), axes, reduction_from_code(reduction, "reduce_axes", false));
}

}  // namespace

int32_t fill_array(const ArrayInfo& info, double value) {
  auto out = StoredArray::create_scratch(info, "fill");
  // A new file reads as (positive) zeros already.
  if (value == 0.0 && !std::signbit(value)) return reg().add(out);
  // No instructions: the result is the scalar's register, stored in `info.dtype`.
  Program fill{1, info.dtype, Reduction::kNone, 0, {}, {}};
  ProgramRunner runner(fill, {}, {value});
  stream_elements("fill", info.describe(), info.numel(), {}, out.get(),
                  [&](int64_t, const std::vector<const void*>&, void* dst, int64_t, int64_t count) {
                    runner.run({}, dst, count);
                  });
  return reg().add(out);
}

int32_t transpose_array(int32_t handle, const std::vector<int64_t>& perm) {
  return reg().add(transposed(reg().get(handle), perm));
}

ArrayRef transposed(const ArrayRef& in, const std::vector<int64_t>& perm) {
  const ArrayInfo& info = in->info();
  const int nd = static_cast<int>(info.shape.size());
  std::vector<bool> seen(nd, false);
  bool valid = static_cast<int>(perm.size()) == nd;
  for (int64_t p : perm) {
    if (!valid || p < 0 || p >= nd || seen[p]) {
      valid = false;
      break;
    }
    seen[p] = true;
  }
  if (!valid)
    throw ValueError("transpose: axes are not a permutation of the " + std::to_string(nd) +
                     " axes of " + info.describe());
  ArrayInfo out_info{info.dtype, std::vector<int64_t>(nd)};
  for (int d = 0; d < nd; ++d) out_info.shape[d] = info.shape[perm[d]];
  auto out = StoredArray::create_scratch(out_info, "transpose", ScratchContents::kOverwritten);
  const int64_t isz = static_cast<int64_t>(itemsize(info.dtype));
  std::vector<int64_t> ext =
      plan_transpose_tile("transpose(" + info.describe() + ")", info.shape, perm, isz);
  int64_t tile_elems = 1;
  for (int64_t e : ext) tile_elems *= e;
  // Tiles are visited in output order so that writes advance through the file.
  std::vector<int64_t> out_ext(nd), counts(nd);
  int64_t n_tasks = info.numel() == 0 ? 0 : 1;
  for (int d = 0; d < nd; ++d) {
    out_ext[d] = ext[perm[d]];
    counts[d] = (out_info.shape[d] + out_ext[d] - 1) / out_ext[d];
    n_tasks *= counts[d];
  }
  auto out_slab = [&](int64_t t) {
    Slab s{std::vector<int64_t>(nd), std::vector<int64_t>(nd)};
    for (int d = nd - 1; d >= 0; --d) {
      int64_t i = t % counts[d];
      t /= counts[d];
      s.start[d] = i * out_ext[d];
      s.extent[d] = std::min(out_ext[d], out_info.shape[d] - s.start[d]);
    }
    return s;
  };
  auto in_slab = [&](const Slab& o) {
    Slab s{std::vector<int64_t>(nd), std::vector<int64_t>(nd)};
    for (int d = 0; d < nd; ++d) {
      s.start[perm[d]] = o.start[d];
      s.extent[perm[d]] = o.extent[d];
    }
    return s;
  };
  StreamBuffers in_buf(tile_elems * isz), out_buf(tile_elems * isz);
  PipelineStages stages;
  stages.read = [&](int64_t t) { read_slab(*in, info.shape, in_slab(out_slab(t)), in_buf.at(t)); };
  stages.compute = [&](int64_t t) {
    Slab s = in_slab(out_slab(t));
    permute_tile(in_buf.at(t), out_buf.at(t), s.extent.data(), perm.data(), nd, isz);
  };
  stages.write = [&](int64_t t) { write_slab(*out, out_info.shape, out_slab(t), out_buf.at(t)); };
  run_pipeline(n_tasks, stages);
  return out;
}

void copy_into(int32_t dst, int32_t src) {
  ArrayRef d = reg().get(dst), s = reg().get(src);
  if (!d->writable()) {
    throw ReadOnlyError("cannot update " + d->path() +
                        ": it was opened read-only (open it with mode=\"r+\")");
  }
  check_same_layout("update_", {d, s});
  const ArrayInfo& info = d->info();
  // Into a new file renamed over dst's, not over dst's bytes in place: a
  // crash part-way must not leave some blocks new and some old.
  d->replace_data([&](const StoredArray& staged) {
    // Not d's own file: no other update of it runs while this one holds it.
    ReadPins pins(s->shared_file() == d->shared_file() ? files_of({}) : files_of({s}));
    ChunkReservation chunk_caches({s});
    stream_elements(
        "update_", describe_call("update_", {d, s}), info.numel(), {s}, &staged,
        [&](int64_t, const std::vector<const void*>& in, void* out, int64_t, int64_t count) {
          std::memcpy(out, in[0], static_cast<size_t>(count) * itemsize(info.dtype));
        });
  });
}

void copy_all_into(const std::vector<int32_t>& dsts, const std::vector<int32_t>& srcs,
                   const std::vector<std::string>& names) {
  if (dsts.size() != srcs.size() || dsts.size() != names.size())
    throw ValueError("update_tree_: as many targets, new values and names are needed");
  std::vector<ArrayUpdate> updates;
  std::vector<const SharedFile*> targets;
  for (size_t i = 0; i < dsts.size(); ++i) {
    ArrayRef d = reg().get(dsts[i]), s = reg().get(srcs[i]);
    check_same_layout("update_tree_", {d, s});
    targets.push_back(d->shared_file().get());
    updates.push_back(ArrayUpdate{
        d, names[i], [d, s, &targets](const StoredArray& staged) {
          // A target's file is held by this update: no other update of it runs.
          const bool held =
              std::find(targets.begin(), targets.end(), s->shared_file().get()) != targets.end();
          ReadPins pins(held ? files_of({}) : files_of({s}));
          ChunkReservation chunk_caches({s});
          const ArrayInfo& info = d->info();
          stream_elements(
              "update_tree_", describe_call("update_tree_", {d, s}), info.numel(), {s}, &staged,
              [&](int64_t, const std::vector<const void*>& in, void* out, int64_t, int64_t count) {
                std::memcpy(out, in[0], static_cast<size_t>(count) * itemsize(info.dtype));
              });
        }});
  }
  replace_all(updates);
}

void save_array(int32_t handle, const std::string& path) {
  ArrayRef src = reg().get(handle);
  auto dst = StoredArray::create_file(path, src->info());
  const ArrayInfo& info = src->info();
  ReadPins pins(files_of({src}));
  ChunkReservation chunk_caches({src});
  stream_elements(
      "save", info.describe(), info.numel(), {src}, dst.get(),
      [&](int64_t, const std::vector<const void*>& in, void* out, int64_t, int64_t count) {
        std::memcpy(out, in[0], static_cast<size_t>(count) * itemsize(info.dtype));
      });
  dst->file()->sync();
}

void save_into(int32_t handle, const std::string& path, uint64_t offset) {
  ArrayRef src = reg().get(handle);
  const ArrayInfo& info = src->info();
  // The destination is a raw view of the file's bytes at `offset`; the caller
  // made the file (a safetensors file being written) and renames it into place.
  auto dst = StoredArray::open(path, "raw", OpenOptions{true, info, offset});
  ReadPins pins(files_of({src}));
  ChunkReservation chunk_caches({src});  // a Zarr or HDF5 source's decode cache, in the budget
  stream_elements(
      "save_into", info.describe(), info.numel(), {src}, dst.get(),
      [&](int64_t, const std::vector<const void*>& in, void* out, int64_t, int64_t count) {
        std::memcpy(out, in[0], static_cast<size_t>(count) * itemsize(info.dtype));
      });
  dst->file()->sync();
}

void write_from_memory(int32_t handle, const void* src, uint64_t nbytes) {
  ArrayRef arr = reg().get(handle);
  const ArrayInfo& info = arr->info();
  if (nbytes != info.nbytes()) {
    throw ValueError("buffer of " + std::to_string(nbytes) + " bytes does not match " +
                     info.describe() + " (" + std::to_string(info.nbytes()) + " bytes)");
  }
  const size_t isz = itemsize(info.dtype);
  auto* base = static_cast<const unsigned char*>(src);
  // Copy into aligned blocks so the writes can bypass the page cache.
  stream_elements(
      "from_numpy", info.describe(), info.numel(), {}, arr.get(),
      [&](int64_t, const std::vector<const void*>&, void* out, int64_t first, int64_t count) {
        std::memcpy(out, base + first * isz, static_cast<size_t>(count) * isz);
      });
}

void read_to_memory(int32_t handle, void* dst, uint64_t nbytes) {
  ArrayRef arr = reg().get(handle);
  const ArrayInfo& info = arr->info();
  if (nbytes != info.nbytes()) {
    throw ValueError("buffer of " + std::to_string(nbytes) + " bytes does not match " +
                     info.describe());
  }
  ReadPins pins(files_of({arr}));
  ChunkReservation chunk_caches({arr});
  const size_t isz = itemsize(info.dtype);
  auto* base = static_cast<unsigned char*>(dst);
  stream_elements(
      "materialize", info.describe(), info.numel(), {arr}, nullptr,
      [&](int64_t, const std::vector<const void*>& in, void*, int64_t first, int64_t count) {
        std::memcpy(base + first * isz, in[0], static_cast<size_t>(count) * isz);
      });
}

namespace {

int64_t row_elems(const ArrayInfo& info) {
  int64_t n = 1;
  for (size_t d = 1; d < info.shape.size(); ++d) n *= info.shape[d];
  return n;
}

int64_t clamp_start(double start, int64_t count, int64_t rows) {
  int64_t s = static_cast<int64_t>(start);
  return std::max<int64_t>(0, std::min(s, rows - count));
}

// A new array of zeros with `rows` written at a (clamped) leading index.
int32_t put_rows(const ArrayInfo& info, double start, const MemoryOperand& rows) {
  if (info.shape.empty()) throw ValueError("put_rows: the array needs a leading axis");
  const int64_t per_row = row_elems(info) * static_cast<int64_t>(itemsize(info.dtype));
  if (per_row == 0 || rows.nbytes % per_row != 0)
    throw ValueError("put_rows: rows do not match " + info.describe());
  const int64_t count = static_cast<int64_t>(rows.nbytes) / per_row;
  auto out = StoredArray::create_scratch(info, "put_rows");
  const int64_t first = clamp_start(start, count, info.shape[0]);
  out->write_elems(rows.data, first * row_elems(info), count * row_elems(info));
  return reg().add(out);
}

}  // namespace

void read_rows(int32_t handle, int64_t start, int64_t count, void* dst, uint64_t nbytes) {
  ArrayRef arr = reg().get(handle);
  const ArrayInfo& info = arr->info();
  if (info.shape.empty() || count < 0 || count > info.shape[0]) {
    throw ValueError("rows: cannot take " + std::to_string(count) + " rows of " + info.describe());
  }
  const int64_t per_row = row_elems(info);
  if (nbytes != static_cast<uint64_t>(count * per_row) * itemsize(info.dtype)) {
    throw ValueError("rows: output buffer does not match " + std::to_string(count) + " rows of " +
                     info.describe());
  }
  const int64_t first = clamp_start(static_cast<double>(start), count, info.shape[0]);
  // A loop walking the rows finds the next rows read already (storage/readahead.hpp).
  read_elems_ahead(*arr, dst, first * per_row, count * per_row);
}

// -- the kernels' typed calls ----------------------------------------------------

namespace {

// A new array's dtype and shape.
struct ArrayParams {
  DType dtype = DType::f32;
  std::vector<int64_t> shape;
};
const Schema<ArrayParams> kArraySchema{field("dtype", &ArrayParams::dtype),
                                       field("shape", &ArrayParams::shape)};

ArrayInfo info_of(const ArrayParams& p) { return ArrayInfo{p.dtype, p.shape}; }

int32_t run_fill(const KernelCall& call, const ArrayParams& p) {
  expect_operands(call, 0, 1, 0);
  return fill_array(info_of(p), call.operands.scalars[0]);
}
const KernelRegistration kFill{"fill", kArraySchema, run_fill};

int32_t run_from_in_memory(const KernelCall& call, const ArrayParams& p) {
  expect_operands(call, 0, 0, 1);
  const MemoryOperand& src = call.operands.memory[0];
  int32_t h = reg().add(StoredArray::create_scratch(info_of(p), "from_in_memory"));
  try {
    write_from_memory(h, src.data, src.nbytes);
  } catch (...) {
    reg().release_floating(h);  // a short buffer or a full disk leaves no handle or file behind
    throw;
  }
  return h;
}
const KernelRegistration kFromInMemory{"from_in_memory", kArraySchema, run_from_in_memory};

int32_t run_put_rows(const KernelCall& call, const ArrayParams& p) {
  expect_operands(call, 0, 1, 1);
  return put_rows(info_of(p), call.operands.scalars[0], call.operands.memory[0]);
}
const KernelRegistration kPutRows{"put_rows", kArraySchema, run_put_rows};

struct TransposeParams {
  std::vector<int64_t> perm;
};
const Schema<TransposeParams> kTransposeSchema{field("perm", &TransposeParams::perm)};
int32_t run_transpose(const KernelCall& call, const TransposeParams& p) {
  expect_operands(call, 1, 0, 0);
  return transpose_array(call.operands.handles[0], p.perm);
}
const KernelRegistration kTranspose{"transpose", kTransposeSchema, run_transpose};

struct ReshapeParams {
  std::vector<int64_t> shape;
};
const Schema<ReshapeParams> kReshapeSchema{field("shape", &ReshapeParams::shape)};
int32_t run_reshape(const KernelCall& call, const ReshapeParams& p) {
  expect_operands(call, 1, 0, 0);
  return reg().add(StoredArray::reshaped(reg().get(call.operands.handles[0]), p.shape));
}
const KernelRegistration kReshape{"reshape", kReshapeSchema, run_reshape};

struct MatmulParams {
  bool trans_a = false, trans_b = false;
};
const Schema<MatmulParams> kMatmulSchema{field("trans_a", &MatmulParams::trans_a),
                                         field("trans_b", &MatmulParams::trans_b)};
int32_t run_matmul(const KernelCall& call, const MatmulParams& p) {
  expect_operands(call, 2, 0, 0);
  return matmul_arrays(call.operands.handles[0], call.operands.handles[1], p.trans_a, p.trans_b);
}
const KernelRegistration kMatmul{"matmul", kMatmulSchema, run_matmul};

// reduction: a code of program/reduction.hpp's table; axes: the reduced axes.
struct ReduceAxesParams {
  int64_t reduction = 0;
  std::vector<int64_t> axes;
};
const Schema<ReduceAxesParams> kReduceAxesSchema{field("reduction", &ReduceAxesParams::reduction),
                                                 field("axes", &ReduceAxesParams::axes)};

int32_t run_reduce_axes(const KernelCall& call, const ReduceAxesParams& p) {
  expect_operands(call, 1, 0, 0);
  AxisReducer reducer = axis_reducer(call.operands.handles[0], p.reduction, p.axes);
  const DType dt = reg().get(call.operands.handles[0])->info().dtype;
  auto out = StoredArray::create_scratch(ArrayInfo{dt, reducer.out_shape()}, "reduce_axes");
  std::vector<std::byte> staged;
  reducer.run("reduce_axes", [&](int64_t first, int64_t count, const auto* values) {
    staged.resize(static_cast<size_t>(count) * itemsize(dt));
    store_folded(values, count, dt, staged.data());
    out->write_elems(staged.data(), first, count);
  });
  return reg().add(out);
}
const KernelRegistration kReduceAxes{"reduce_axes", kReduceAxesSchema, run_reduce_axes};

// In memory, the result is in `dtype`: JAX's canonical dtype of the input's (float32 for a
// float64 array while JAX runs without x64).
struct ReduceAxesInMemoryParams {
  int64_t reduction = 0;
  std::vector<int64_t> axes;
  DType dtype = DType::f32;
};
const Schema<ReduceAxesInMemoryParams> kReduceAxesInMemorySchema{
    field("reduction", &ReduceAxesInMemoryParams::reduction),
    field("axes", &ReduceAxesInMemoryParams::axes),
    field("dtype", &ReduceAxesInMemoryParams::dtype)};

void run_reduce_axes_in_memory(const KernelCall& call, const ReduceAxesInMemoryParams& p) {
  expect_operands(call, 1, 0, 0);
  AxisReducer reducer = axis_reducer(call.operands.handles[0], p.reduction, p.axes);
  const ArrayInfo out_info{p.dtype, reducer.out_shape()};
  if (call.out.nbytes != out_info.nbytes())
    throw ValueError("reduce_axes: an output buffer of " + std::to_string(call.out.nbytes) +
                     " bytes does not hold " + out_info.describe());
  auto* base = static_cast<std::byte*>(call.out.data);
  reducer.run("reduce_axes", [&](int64_t first, int64_t count, const auto* values) {
    store_folded(values, count, p.dtype, base + first * static_cast<int64_t>(itemsize(p.dtype)));
  });
}
const KernelRegistration kReduceAxesInMemory{"reduce_axes", kReduceAxesInMemorySchema,
                                             run_reduce_axes_in_memory};

void run_to_in_memory(const KernelCall& call, const NoParams&) {
  expect_operands(call, 1, 0, 0);
  read_to_memory(call.operands.handles[0], call.out.data, call.out.nbytes);
}
const KernelRegistration kToInMemory{"to_in_memory", Schema<NoParams>{}, run_to_in_memory};

struct RowsParams {
  int64_t count = 0;
};
const Schema<RowsParams> kRowsSchema{field("count", &RowsParams::count)};
void run_rows(const KernelCall& call, const RowsParams& p) {
  expect_operands(call, 1, 1, 0);
  read_rows(call.operands.handles[0], static_cast<int64_t>(call.operands.scalars[0]), p.count,
            call.out.data, call.out.nbytes);
}
const KernelRegistration kRows{"rows", kRowsSchema, run_rows};

// -- elementwise programs ------------------------------------------------------------
//
// One schema for the three map kernels: the program (ProgramCode's fields), the output
// shape, and each in-memory operand's dtype and shape (memory_ranks[i] extents of
// memory_dims each, in order). label names the op in messages ("add", "mul+add").
struct ElementwiseParams : ProgramCode {
  std::string label;
  std::vector<int64_t> shape;
  std::vector<int64_t> memory_dtypes, memory_ranks, memory_dims;
};

Schema<ElementwiseParams> elementwise_schema() {
  using P = ElementwiseParams;
  return Schema<P>(inherit<P, ProgramCode>(
      program_code_fields(),
      {field("label", &P::label), field("shape", &P::shape),
       field("memory_dtypes", &P::memory_dtypes), field("memory_ranks", &P::memory_ranks),
       field("memory_dims", &P::memory_dims)}));
}
const Schema<ElementwiseParams> kElementwiseSchema = elementwise_schema();

ProgramCall program_call(const KernelCall& call, const ElementwiseParams& p) {
  ProgramCall out{p.label, call.operands.handles, {}, call.operands.scalars, p.shape, p};
  const auto& memory = call.operands.memory;
  if (p.memory_dtypes.size() != memory.size() || p.memory_ranks.size() != memory.size()) {
    reject_field(call.kernel, "memory_dtypes",
                 "lists " + std::to_string(p.memory_dtypes.size()) + " dtypes and " +
                     std::to_string(p.memory_ranks.size()) + " ranks for " +
                     std::to_string(memory.size()) + " in-memory operands");
  }
  size_t dim = 0;
  for (size_t i = 0; i < memory.size(); ++i) {
    const auto rank = static_cast<size_t>(std::max<int64_t>(p.memory_ranks[i], 0));
    if (dim + rank > p.memory_dims.size()) {
      reject_field(call.kernel, "memory_dims", "has fewer extents than memory_ranks adds up to");
    }
    out.memory.push_back(
        MemoryArray{memory[i],
                    dtype_from_int(p.memory_dtypes[i]),
                    {p.memory_dims.begin() + static_cast<std::ptrdiff_t>(dim),
                     p.memory_dims.begin() + static_cast<std::ptrdiff_t>(dim + rank)}});
    dim += rank;
  }
  if (dim != p.memory_dims.size()) {
    reject_field(call.kernel, "memory_dims", "has more extents than memory_ranks adds up to");
  }
  return out;
}

int32_t run_map(const KernelCall& call, const ElementwiseParams& p) {
  return map_program(program_call(call, p));
}
const KernelRegistration kMap{"map", kElementwiseSchema, run_map};

std::vector<int32_t> run_map_multi(const KernelCall& call, const ElementwiseParams& p) {
  return map_program_outputs(program_call(call, p));
}
const KernelRegistration kMapMulti{"map_multi", kElementwiseSchema, run_map_multi};

double run_map_reduce(const KernelCall& call, const ElementwiseParams& p) {
  return reduce_program(program_call(call, p));
}
const KernelRegistration kMapReduce{"map_reduce", kElementwiseSchema, run_map_reduce};

}  // namespace

const std::vector<FieldDecl<ProgramCode>>& program_code_fields() {
  using P = ProgramCode;
  static const std::vector<FieldDecl<P>> fields{field("n_regs", &P::n_regs),
                                                field("out_dtype", &P::out_dtype),
                                                field("reduction", &P::reduction),
                                                field("out_regs", &P::out_regs),
                                                field("op", &P::op),
                                                field("dst", &P::dst),
                                                field("a", &P::a),
                                                field("b", &P::b),
                                                field("c", &P::c),
                                                field("scalar_dtypes", &P::scalar_dtypes)};
  return fields;
}

}  // namespace jask
