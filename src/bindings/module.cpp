// Python bindings of the engine (module jask._engine). Every call that does
// I/O releases the GIL. Engine exceptions become the matching Python ones.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <cerrno>
#include <cstring>
#include <initializer_list>
#include <utility>

#include "base/errors.hpp"
#include "call/registry.hpp"
#include "exec/pipeline.hpp"
#include "exec/stats.hpp"
#include "ffi_handlers.hpp"
#include "io/file.hpp"
#include "kernels/blas.hpp"
#include "kernels/ops.hpp"
#include "plan/planner.hpp"
#include "program/program.hpp"
#include "storage/array_store.hpp"
#include "storage/chunked.hpp"
#include "storage/io_config.hpp"
#include "storage/journal.hpp"
#include "storage/readahead.hpp"
#include "storage/scratch.hpp"
#include "storage/scratch_pool.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace jask {
namespace {

using Bytes = nb::ndarray<nb::c_contig, nb::device::cpu>;
using ReadOnlyBytes = nb::ndarray<nb::ro, nb::c_contig, nb::device::cpu>;

// The in-memory operands of an op, as the engine takes them.
std::vector<MemoryOperand> memory_operands(const std::vector<ReadOnlyBytes>& buffers) {
  std::vector<MemoryOperand> memory;
  for (const auto& b : buffers) memory.push_back(MemoryOperand{b.data(), b.nbytes()});
  return memory;
}

// One parameter as the engine's AttrValue: a bool, an int, a float, a str or a
// sequence of ints (what jask's ops state in kernel_params).
AttrValue attr_value(const std::string& kernel, const std::string& name, nb::handle v) {
  if (PyBool_Check(v.ptr())) return v.ptr() == Py_True;
  if (PyFloat_Check(v.ptr())) return nb::cast<double>(v);
  if (PyUnicode_Check(v.ptr())) return nb::cast<std::string>(v);
  if (PyIndex_Check(v.ptr())) return nb::cast<int64_t>(nb::int_(v));
  if (PySequence_Check(v.ptr())) {
    std::vector<int64_t> ints;
    for (nb::handle item : v) {
      if (!PyIndex_Check(item.ptr()) || PyBool_Check(item.ptr())) {
        reject_field(kernel, name, "must hold ints only");
      }
      ints.push_back(nb::cast<int64_t>(nb::int_(item)));
    }
    return ints;
  }
  reject_field(kernel, name,
               std::string("has a type kernels do not take: ") + Py_TYPE(v.ptr())->tp_name);
}

// An eager call staged as the engine takes it; `params` maps field names to values.
KernelCall eager_call(const std::string& kernel, std::vector<int32_t> handles,
                      std::vector<double> scalars, const std::vector<ReadOnlyBytes>& memory,
                      const nb::dict& params) {
  KernelCall call{kernel, {std::move(handles), std::move(scalars), memory_operands(memory)}, {}};
  for (auto [key, value] : params) {
    const std::string name = nb::cast<std::string>(key);
    call.attrs.emplace(name, attr_value(kernel, name, value));
  }
  return call;
}

// Runs a staged call with the GIL released (the call holds everything it reads).
KernelResult run_unlocked(ResultKind kind, const KernelCall& call) {
  nb::gil_scoped_release unlocked;
  return run_kernel(kind, call);
}

// The eager entry of a result kind whose results come back as Python values:
// `extract` picks them out of the kernel's result.
template <class Extract>
void def_eager_entry(nb::module_& m, const char* name, ResultKind kind, Extract extract) {
  m.def(
      name,
      [kind, extract](const std::string& kernel, std::vector<int32_t> handles,
                      std::vector<double> scalars, std::vector<ReadOnlyBytes> memory,
                      nb::dict params) {
        KernelCall call =
            eager_call(kernel, std::move(handles), std::move(scalars), memory, params);
        return extract(run_unlocked(kind, call));
      },
      "kernel"_a, "handles"_a, "scalars"_a, "memory"_a, "params"_a);
}

// A Python dict of named numbers (engine statistics).
template <class T>
nb::dict named(std::initializer_list<std::pair<const char*, T>> items) {
  nb::dict d;
  for (const auto& [name, value] : items) d[name] = value;
  return d;
}

// Messages name paths and header text, which need not be UTF-8: undecodable
// bytes are shown escaped (a bare PyErr_SetString would raise
// UnicodeDecodeError instead of the error).
void set_error(PyObject* type, const char* what) {
  PyObject* message = PyUnicode_DecodeUTF8(what, std::strlen(what), "backslashreplace");
  if (message == nullptr) return;  // MemoryError is set
  PyErr_SetObject(type, message);
  Py_DECREF(message);
}

void translate_errors() {
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const NotFoundError& e) {
      set_error(PyExc_FileNotFoundError, e.what());
    } catch (const ReadOnlyError& e) {
      set_error(PyExc_PermissionError, e.what());
    } catch (const ValueError& e) {
      set_error(PyExc_ValueError, e.what());
    } catch (const TypeError& e) {
      set_error(PyExc_TypeError, e.what());
    } catch (const NotImplementedError& e) {
      set_error(PyExc_NotImplementedError, e.what());
    } catch (const MemoryError& e) {
      set_error(PyExc_MemoryError, e.what());
    } catch (const DirectoryError& e) {
      set_error(PyExc_IsADirectoryError, e.what());
    } catch (const LockedError& e) {
      PyErr_SetObject(PyExc_BlockingIOError, nb::make_tuple(EAGAIN, e.what()).ptr());
    } catch (const IoError& e) {
      set_error(PyExc_OSError, e.what());
    }
  });
}

nb::tuple array_info(int32_t handle) {
  ArrayRef a = Registry::instance().get(handle);
  nb::list shape;
  for (int64_t d : a->info().shape) shape.append(d);
  return nb::make_tuple(static_cast<int>(a->info().dtype), nb::tuple(shape), a->path(),
                        a->data_offset(), a->writable(), a->is_scratch());
}

int32_t register_array(ArrayRef a) { return Registry::instance().add(std::move(a)); }

DType checked_dtype(int code) { return dtype_from_int(code); }

using ChunkRows = nb::ndarray<const int64_t, nb::ndim<2>, nb::c_contig, nb::device::cpu>;
using CodecList = std::vector<std::pair<std::string, int64_t>>;

std::vector<CodecStep> codec_steps(const CodecList& codecs, const std::string& what) {
  std::vector<CodecStep> steps;
  for (const auto& [name, param] : codecs) steps.push_back(codec_step(name, param, what));
  return steps;
}

// The chunked array of jask/formats/_chunked.py (its checks ran there).
int32_t open_chunked(const std::string& path, const std::string& name, int dtype,
                     std::vector<int64_t> shape, std::vector<int64_t> chunk_shape,
                     const CodecList& codecs, std::vector<std::string> files, ChunkRows chunks,
                     const nb::bytes& fill) {
  ChunkTable t;
  t.path = path;
  t.name = name;
  t.info = ArrayInfo{checked_dtype(dtype), std::move(shape)};
  t.chunk_shape = std::move(chunk_shape);
  t.codecs = codec_steps(codecs, name.empty() ? path : path + " (" + name + ")");
  t.files = std::move(files);
  // 3 columns: a row per chunk of the grid; 4: (chunk id, ...) of the stored chunks only.
  const size_t cols = chunks.shape(1);
  if (cols != 3 && cols != 4) throw ValueError(path + ": the chunk table must have 3 or 4 columns");
  t.sparse = cols == 4;
  const int64_t* rows = chunks.data();
  for (size_t i = 0; i < chunks.shape(0); ++i, rows += cols) {
    if (t.sparse) t.ids.push_back(*rows);
    t.chunks.push_back(ChunkLocation{rows[cols - 3], rows[cols - 2], rows[cols - 1]});
  }
  const auto* f = static_cast<const std::byte*>(static_cast<const void*>(fill.c_str()));
  t.fill.assign(f, f + fill.size());
  nb::gil_scoped_release unlocked;
  return register_array(StoredArray::open_chunked(std::move(t)));
}

// A call's progress as (seq, op, start_ns, end_ns, blocks_read, blocks_done, blocks_planned,
// bytes, program, failed).
nb::tuple progress_tuple(const CallProgress& c) {
  return nb::make_tuple(c.seq, c.op, c.start_ns, c.end_ns, c.blocks_read, c.blocks_done,
                        c.blocks_planned, c.bytes, c.program, c.failed);
}

// A program run's progress as a dict of ProgramRunProgress's fields.
nb::dict program_run_dict(const ProgramRunProgress& r) {
  nb::dict d;
  d["seq"] = r.seq;
  d["program"] = r.program;
  d["op"] = r.op;
  d["start_ns"] = r.start_ns;
  d["end_ns"] = r.end_ns;
  d["last_call_end_ns"] = r.last_call_end_ns;
  d["calls_done"] = r.calls_done;
  d["call_running"] = r.call_running;
  d["bytes"] = r.bytes;
  d["expected_calls"] = r.expected_calls;
  d["expected_bytes"] = r.expected_bytes;
  d["expected_ns"] = r.expected_ns;
  d["failed"] = r.failed;
  return d;
}

}  // namespace
}  // namespace jask

NB_MODULE(_engine, m) {
  using namespace jask;
  translate_errors();
  using nb::call_guard;
  using Unlocked = nb::call_guard<nb::gil_scoped_release>;

  m.def("set_memory_budget", &set_memory_budget, "nbytes"_a);
  m.def("memory_budget", &total_memory_budget);
  m.def("block_budget", &memory_budget);
  m.def("new_program_slot", &new_program_slot);
  m.def("note_program_bytes", &note_program_bytes, "slot"_a, "nbytes"_a);
  m.def("program_bytes", &program_bytes, "slot"_a);
  m.def("largest_program_bytes", &largest_program_bytes);
  m.attr("MIN_BUDGET") = kMinBudget;
  m.attr("MAX_BUDGET") = kMaxBudget;
  m.def("buffer_bytes", &buffer_bytes);
  // Since reset_memory_peak, whatever peak scopes (jask.stats() blocks) opened meanwhile.
  m.def("peak_buffer_bytes", &blocks_peak);
  m.def("reset_peak_buffer_bytes", &reset_blocks_peak);
  m.def("open_peak_scope", &open_peak_scope);
  m.def("peak_scope_bytes", &peak_scope_bytes, "scope"_a);
  m.def("close_peak_scope", &close_peak_scope, "scope"_a);
  m.def(
      "configure_scratch",
      [](const std::string& root, bool allow_tmpfs) {
        Scratch::instance().configure(root, allow_tmpfs);
      },
      "root"_a, "allow_tmpfs"_a);
  m.def("scratch_configured", [] { return Scratch::instance().configured(); });
  m.def("scratch_process_dir", [] { return Scratch::instance().process_dir(); });
  m.def("scratch_reclaimed_folders", [] { return Scratch::instance().reclaimed_folders(); });
  m.def(
      "shutdown",
      [] {
        Registry::instance().clear();
        Scratch::instance().shutdown();
      },
      Unlocked());
  // On SIGTERM/SIGHUP: the folder goes, the arrays stay (the process ends next).
  m.def(
      "remove_scratch", [] { Scratch::instance().shutdown(); }, Unlocked());
  m.def("is_ram_backed", &is_ram_backed, "path"_a);
  m.def("load_blas", &load_blas, "path"_a, "num_threads"_a);
  m.def("blas_loaded", &blas_loaded);
  m.def("set_direct_io", &set_direct_io_enabled, "enabled"_a);
  // update_ writes in place (journaled) when a file holds more than this many
  // bytes besides the array (storage/journal.hpp).
  m.def("set_in_place_update_threshold", &set_in_place_update_threshold, "nbytes"_a);
  m.def("in_place_update_threshold", &in_place_update_threshold);
  m.def(
      "set_read_mode",
      [](const std::string& mode) {
        if (mode == "auto") return set_read_mode(ReadMode::kAuto);
        if (mode == "direct") return set_read_mode(ReadMode::kDirect);
        if (mode == "buffered") return set_read_mode(ReadMode::kBuffered);
        throw ValueError("unknown read mode '" + mode +
                         "': expected 'auto', 'direct' or 'buffered'");
      },
      "mode"_a);
  m.def("read_mode", [] {
    switch (read_mode()) {
      case ReadMode::kDirect: return "direct";
      case ReadMode::kBuffered: return "buffered";
      default: return "auto";
    }
  });
  m.def(
      "set_scratch_recycling", [](bool enabled) { ScratchPool::instance().set_enabled(enabled); },
      "enabled"_a);
  m.def("scratch_recycling", [] { return ScratchPool::instance().enabled(); });
  m.def("scratch_pool_stats", [] {
    ScratchPool::Stats s = ScratchPool::instance().stats();
    return named<uint64_t>({{"live_bytes", s.live_bytes},
                            {"pooled_bytes", s.pooled_bytes},
                            {"pooled_files", s.pooled_files},
                            {"reused_files", s.reused_files}});
  });
  m.def("pipeline_tasks_run", &pipeline_tasks_run);
  m.def("pipeline_stage_seconds", [] {
    StageSeconds s = pipeline_stage_seconds();
    return named<double>(
        {{"read", s.read}, {"compute", s.compute}, {"write", s.write}, {"span", s.span}});
  });
  // exec/stats.hpp: jask.stats() and the progress bars (jask/_stats.py, jask/_progress.py).
  m.def("op_totals", [] {
    nb::dict d;
    for (const auto& [op, t] : op_totals()) {
      nb::dict fields = named<uint64_t>({{"calls", t.calls},
                                         {"blocks", t.blocks},
                                         {"bytes_read", t.bytes_read},
                                         {"bytes_written", t.bytes_written}});
      fields.update(named<double>({{"read_s", t.read_ns * 1e-9},
                                   {"compute_s", t.compute_ns * 1e-9},
                                   {"write_s", t.write_ns * 1e-9},
                                   {"wall_s", t.wall_ns * 1e-9}}));
      d[nb::str(op.c_str())] = fields;
    }
    return d;
  });
  m.def("reset_op_totals", &reset_op_totals);
  m.def("stats_clock_ns", &stats_clock_ns);
  m.def("set_timeline", &set_timeline, "enabled"_a);
  m.def("timeline_events", [] {
    nb::list events;
    for (const StageEvent& e : timeline_events()) {
      events.append(nb::make_tuple(stage_name(e.stage), e.op, e.start_ns, e.end_ns, e.bytes));
    }
    return nb::make_tuple(events, timeline_dropped());
  });
  m.attr("TIMELINE_LIMIT") = kTimelineLimit;
  m.def(
      "wait_for_call",
      [](double timeout_s) -> std::optional<nb::tuple> {
        std::optional<CallProgress> running;
        {
          nb::gil_scoped_release unlocked;
          running = wait_for_call(timeout_s);
        }
        if (!running) return std::nullopt;
        return progress_tuple(*running);
      },
      "timeout_s"_a);
  m.def("call_waiters", &call_waiters);
  m.def(
      "finished_calls",
      [](uint64_t after) {
        nb::list calls;
        for (const CallProgress& c : finished_calls(after)) calls.append(progress_tuple(c));
        return calls;
      },
      "after"_a);
  m.def("last_call_seq", &last_call_seq);
  m.def("program_run", []() -> std::optional<nb::dict> {
    std::optional<ProgramRunProgress> r = program_run();
    if (!r) return std::nullopt;
    return program_run_dict(*r);
  });
  m.def(
      "finished_program_runs",
      [](uint64_t after) {
        nb::list runs;
        for (const ProgramRunProgress& r : finished_program_runs(after))
          runs.append(program_run_dict(r));
        return runs;
      },
      "after"_a);
  m.def("end_program_run", &end_program_run, "seq"_a);
  m.def("note_program_calls", &note_program_calls, "slot"_a, "calls"_a);
  m.def("release_call_waiters", &release_call_waiters);
  m.def("set_readahead", &set_readahead_enabled);
  m.def("readahead_stats", [] {
    const ReadaheadStats s = readahead_stats();
    return nb::make_tuple(s.started, s.served, s.dropped, s.held_bytes);
  });
  m.def("io_counters", [] {
    return nb::make_tuple(io_counters().direct_bytes.load(), io_counters().buffered_bytes.load());
  });

  // format: a plug-in's name ("npy", "raw"), or "" to detect it. dtype < 0:
  // no dtype and shape given (the format's header has them).
  m.def(
      "open",
      [](const std::string& path, const std::string& format, bool writable, int dtype,
         std::vector<int64_t> shape, uint64_t offset) {
        OpenOptions options{writable, std::nullopt, offset};
        if (dtype >= 0) options.info = ArrayInfo{checked_dtype(dtype), std::move(shape)};
        ArrayRef array;
        std::vector<std::string> notes;
        {
          nb::gil_scoped_release unlocked;
          RecoveryNotes collected;
          array = StoredArray::open(path, format, options);
          notes = collected.take();
        }
        // What recovery left alone, or read without finishing: warned of once per process.
        for (const std::string& note : notes)
          if (PyErr_WarnEx(PyExc_RuntimeWarning, note.c_str(), 1) != 0) throw nb::python_error();
        return register_array(std::move(array));
      },
      "path"_a, "format"_a, "writable"_a, "dtype"_a = -1, "shape"_a = std::vector<int64_t>(),
      "offset"_a = 0);
  m.def(
      "create",
      [](int dtype, std::vector<int64_t> shape) {
        return register_array(
            StoredArray::create_scratch(ArrayInfo{checked_dtype(dtype), shape}, "array"));
      },
      "dtype"_a, "shape"_a, Unlocked());
  m.def("info", &array_info, "handle"_a);
  m.def("open_chunked", &open_chunked, "path"_a, "name"_a, "dtype"_a, "shape"_a, "chunk_shape"_a,
        "codecs"_a, "files"_a, "chunks"_a, "fill"_a);
  m.def(
      "write_chunked",
      [](int32_t h, const std::vector<int64_t>& chunk_shape, const CodecList& codecs,
         const std::vector<std::optional<std::string>>& paths) {
        ArrayRef a = Registry::instance().get(h);
        std::vector<CodecStep> steps = codec_steps(codecs, a->path());
        nb::gil_scoped_release unlocked;
        BudgetTurn turn;
        CallStats stats("write_chunked");
        return write_chunked(a, chunk_shape, steps, paths);
      },
      "handle"_a, "chunk_shape"_a, "codecs"_a, "paths"_a);
  m.def(
      "crc32c",
      [](const nb::bytes& data, uint32_t value) {
        return crc32c(data.c_str(), data.size(), value);
      },
      "data"_a, "value"_a = 0);
  m.def(
      "is_chunked", [](int32_t h) { return Registry::instance().get(h)->chunked() != nullptr; },
      "handle"_a);
  m.def("chunks_decoded", [](int32_t h) {
    ArrayRef a = Registry::instance().get(h);
    return a->chunked() ? a->chunked()->chunks_decoded() : int64_t{0};
  });
  m.def(
      "acquire", [](int32_t h) { Registry::instance().acquire(h); }, "handle"_a);
  m.def(
      "release", [](int32_t h) { Registry::instance().release(h); }, "handle"_a, Unlocked());
  m.def("live_arrays", [] { return Registry::instance().size(); });

  // One entry per result kind, as the FFI targets: kernel name, operands by kind,
  // and the kernel's parameters as a dict of named fields (its schema decodes them).
  def_eager_entry(m, "array_op", ResultKind::kArray,
                  [](KernelResult r) { return r.handles.at(0); });
  def_eager_entry(m, "arrays_op", ResultKind::kArrays,
                  [](KernelResult r) { return std::move(r.handles); });
  def_eager_entry(m, "scalar_op", ResultKind::kScalar,
                  [](KernelResult r) { return r.values.at(0); });
  def_eager_entry(m, "group_op", ResultKind::kGroup, [](KernelResult r) {
    return std::make_pair(std::move(r.handles), std::move(r.values));
  });
  // An in-memory result is written into the caller's buffer `out`.
  m.def(
      "in_memory_op",
      [](const std::string& kernel, std::vector<int32_t> handles, std::vector<double> scalars,
         std::vector<ReadOnlyBytes> memory, nb::dict params, Bytes out) {
        KernelCall call =
            eager_call(kernel, std::move(handles), std::move(scalars), memory, params);
        call.out = MemoryResult{out.data(), out.nbytes()};
        run_unlocked(ResultKind::kInMemory, call);
      },
      "kernel"_a, "handles"_a, "scalars"_a, "memory"_a, "params"_a, "out"_a);
  // Every registered kernel: {(result kind, name): [(field, type), ...]}.
  m.def("kernel_schemas", [] {
    nb::dict d;
    for (const KernelEntry* e : KernelRegistry::instance().entries()) {
      nb::list fields;
      for (const FieldInfo& f : e->fields) {
        fields.append(nb::make_tuple(f.name, field_type_name(f.type)));
      }
      d[nb::make_tuple(result_kind_name(e->kind), e->name)] = fields;
    }
    return d;
  });
  m.def("opcodes", [] {
    nb::dict d;
    for (const auto& [name, code] : opcode_table()) d[nb::str(name.c_str())] = code;
    return d;
  });
  // The storage dtypes, defined once in base/dtype.cpp: name -> (code, itemsize, kind),
  // kind one of "float", "signed", "unsigned", "bool", "complex".
  m.def("dtypes", [] {
    static const char* kinds[] = {"float", "signed", "unsigned", "bool", "complex"};
    nb::dict d;
    for (const DTypeInfo& t : dtype_table())
      d[nb::str(t.name)] = nb::make_tuple(static_cast<int>(t.dtype), static_cast<int>(t.itemsize),
                                          kinds[static_cast<int>(t.kind)]);
    return d;
  });
  m.def("reductions", [] {
    nb::dict d;
    d["none"] = static_cast<int>(Reduction::kNone);
    for (const ReductionRule& r : kReductions) d[nb::str(r.name)] = static_cast<int>(r.kind);
    return d;
  });
  // The engine calls outside the kernel registry take their turn too (BudgetTurn).
  m.def(
      "copy_into",
      [](int32_t dst, int32_t src) {
        BudgetTurn turn;
        CallStats stats("update_");
        copy_into(dst, src);
      },
      "dst"_a, "src"_a, Unlocked());
  m.def(
      "copy_all_into",
      [](const std::vector<int32_t>& dsts, const std::vector<int32_t>& srcs,
         const std::vector<std::string>& names) {
        BudgetTurn turn;
        CallStats stats("update_tree_");
        copy_all_into(dsts, srcs, names);
      },
      "dsts"_a, "srcs"_a, "names"_a, Unlocked());
  m.def(
      "save",
      [](int32_t h, const std::string& path) {
        BudgetTurn turn;
        CallStats stats("save");
        save_array(h, path);
      },
      "handle"_a, "path"_a, Unlocked());
  m.def(
      "save_into",
      [](int32_t h, const std::string& path, uint64_t offset) {
        BudgetTurn turn;
        CallStats stats("save");
        save_into(h, path, offset);
      },
      "handle"_a, "path"_a, "offset"_a, Unlocked());
  m.def(
      "write_from",
      [](int32_t h, ReadOnlyBytes src) {
        BudgetTurn turn;
        CallStats stats("from_numpy");
        write_from_memory(h, src.data(), src.nbytes());
      },
      "handle"_a, "src"_a, Unlocked());
  m.def(
      "read_into",
      [](int32_t h, Bytes dst) {
        BudgetTurn turn;
        CallStats stats("to_numpy");
        read_to_memory(h, dst.data(), dst.nbytes());
      },
      "handle"_a, "dst"_a, Unlocked());

  // The in-memory part of one block, exposed for bench/block_math.py (C++ vs
  // XLA): the program interpreter on float32 buffers the caller holds.
  m.def(
      "block_map",
      [](const std::string& instr, ReadOnlyBytes a, ReadOnlyBytes b, Bytes out) {
        const int64_t n = static_cast<int64_t>(out.nbytes() / 4);
        if (a.nbytes() != out.nbytes() || b.nbytes() != out.nbytes())
          throw ValueError("block_map: buffer sizes differ");
        Program program{
            3, DType::f32, Reduction::kNone, 2, {Instr{opcode_from_name(instr), 2, 0, 1, 0}}, {}};
        ProgramRunner(program, {DType::f32, DType::f32}, {})
            .run({a.data(), b.data()}, out.data(), n);
      },
      "instr"_a, "a"_a, "b"_a, "out"_a, Unlocked());
  m.def(
      "block_sum",
      [](ReadOnlyBytes a) {
        Program program{2, DType::f32, Reduction::kSum, 1, {Instr{Opcode::kCopy, 1, 0, 0, 0}}, {}};
        ProgramRunner runner(program, {DType::f32}, {});
        runner.run({a.data()}, nullptr, static_cast<int64_t>(a.nbytes() / 4));
        return runner.reduced();
      },
      "a"_a, Unlocked());
  m.def(
      "block_gemm",
      [](ReadOnlyBytes a, ReadOnlyBytes b, Bytes c, int64_t m, int64_t k, int64_t n) {
        gemm(false, false, m, n, k, static_cast<const float*>(a.data()), k,
             static_cast<const float*>(b.data()), n, 0.0f, static_cast<float*>(c.data()), n);
      },
      "a"_a, "b"_a, "c"_a, "m"_a, "k"_a, "n"_a, Unlocked());

  m.def("ffi_targets", [] {
    nb::dict d;
    for (const auto& [name, handler] : ffi_targets()) d[name] = nb::capsule(handler);
    return d;
  });
}
