// Shared helpers for the engine tests: temporary folders on disk, the memory
// budget and scratch space set up per test, and typed array I/O.
//
// ctest runs every test in its own process, but the suite must also pass as
// one process (./engine_tests), so tests never rely on the state another test
// left in the engine's singletons.
#pragma once
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <numeric>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "base/dtype.hpp"
#include "call/registry.hpp"
#include "exec/pipeline.hpp"
#include "io/file.hpp"
#include "plan/planner.hpp"
#include "program/program.hpp"
#include "storage/array_store.hpp"
#include "storage/io_config.hpp"
#include "storage/scratch.hpp"

namespace jask::test {

namespace fs = std::filesystem;

// A folder on disk for test files. /tmp may be tmpfs on other machines, and
// tmpfs neither exercises O_DIRECT nor is accepted as scratch by default.
// JASK_TEST_TMPDIR overrides the choice.
inline std::string disk_temp_base() {
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("JASK_TEST_TMPDIR")) candidates.push_back(env);
  if (const char* env = std::getenv("TMPDIR")) candidates.push_back(env);
  candidates.insert(candidates.end(), {"/var/tmp", "/tmp", fs::current_path().string()});
  for (const auto& c : candidates) {
    std::error_code ec;
    if (!fs::is_directory(c, ec) || ::access(c.c_str(), W_OK) != 0) continue;
    if (!is_ram_backed(c)) return c;
  }
  return "";
}

// A fresh folder, removed with everything in it when the object dies.
class TempDir {
 public:
  explicit TempDir(const std::string& base = disk_temp_base()) {
    if (base.empty()) throw std::runtime_error("no writable folder on disk for test files");
    std::string templ = base + "/jask-test-XXXXXX";
    if (::mkdtemp(templ.data()) == nullptr) throw std::runtime_error("mkdtemp failed in " + base);
    path_ = templ;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// The policy a test hands its reads and writes: O_DIRECT on or off, bytes
// counted in `counters`. Nothing process-wide changes.
inline IoPolicy policy(bool direct, IoCounters* counters = nullptr) {
  return IoPolicy{direct, ReadMode::kDirect, nullptr, counters};
}

// Sets the memory budget for one test and restores the previous one after.
class BudgetGuard {
 public:
  explicit BudgetGuard(int64_t bytes) : saved_(total_memory_budget()) { set_memory_budget(bytes); }
  ~BudgetGuard() { set_memory_budget(saved_); }
  BudgetGuard(const BudgetGuard&) = delete;
  BudgetGuard& operator=(const BudgetGuard&) = delete;

 private:
  int64_t saved_;
};

// Scratch space in a fresh folder on disk for one test. Handles the test
// registered are released first so their files go before the folder does.
class ScratchDir {
 public:
  ScratchDir() { Scratch::instance().configure(dir_.path(), /*allow_tmpfs=*/false); }
  ~ScratchDir() { Registry::instance().clear(); }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const TempDir& root() const { return dir_; }

 private:
  TempDir dir_;
};

inline std::vector<char> read_file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<char>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline void write_file_bytes(const std::string& path, const std::vector<char>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// The budget a "budget too small" error asks for: the N in its advice
// "set_memory_budget(N)", or -1 when the message gives none.
inline int64_t needed_budget_in(const std::string& message) {
  const std::string advice = "set_memory_budget(";
  size_t pos = message.find(advice);
  if (pos == std::string::npos) return -1;
  return std::stoll(message.substr(pos + advice.size()));
}

inline int64_t numel_of(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// Values in storage form. Test values are chosen exact in every dtype, so
// converting through the engine's own converters loses nothing.
// One value in `dt`'s storage at `p`.
inline void encode_value(DType dt, double v, unsigned char* p) {
  switch (dt) {
    case DType::f32: {
      float f = static_cast<float>(v);
      std::memcpy(p, &f, 4);
      break;
    }
    case DType::f64: std::memcpy(p, &v, 8); break;
    case DType::f16: {
      uint16_t h = f32_to_f16(static_cast<float>(v));
      std::memcpy(p, &h, 2);
      break;
    }
    case DType::bf16: {
      uint16_t h = f32_to_bf16(static_cast<float>(v));
      std::memcpy(p, &h, 2);
      break;
    }
    case DType::i32: {
      int32_t x = static_cast<int32_t>(v);
      std::memcpy(p, &x, 4);
      break;
    }
    case DType::b8: *p = v != 0; break;
    default:
      if (is_float8(dt)) {
        *p = f32_to_f8(dt, v);
      } else if (dt == DType::c64 || dt == DType::c128) {  // the real part, imaginary 0
        std::memset(p, 0, itemsize(dt));
        if (dt == DType::c64) {
          float f = static_cast<float>(v);
          std::memcpy(p, &f, 4);
        } else {
          std::memcpy(p, &v, 8);
        }
      } else {  // integers: the low bytes of the wrapped value
        const int64_t x = wrap_int(dt, v >= 9.2e18 ? static_cast<int64_t>(static_cast<uint64_t>(v))
                                                   : static_cast<int64_t>(v));
        std::memcpy(p, &x, itemsize(dt));
      }
  }
}

inline std::vector<unsigned char> encode(DType dt, const std::vector<double>& values) {
  const size_t isz = itemsize(dt);
  std::vector<unsigned char> out(values.size() * isz);
  for (size_t i = 0; i < values.size(); ++i) encode_value(dt, values[i], out.data() + i * isz);
  return out;
}

inline std::vector<double> decode(DType dt, const void* data, int64_t n) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  const size_t isz = itemsize(dt);
  std::vector<double> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const unsigned char* p = bytes + i * isz;
    switch (dt) {
      case DType::f32: {
        float f;
        std::memcpy(&f, p, 4);
        out[i] = f;
        break;
      }
      case DType::f64: std::memcpy(&out[i], p, 8); break;
      case DType::f16: {
        uint16_t h;
        std::memcpy(&h, p, 2);
        out[i] = f16_to_f32(h);
        break;
      }
      case DType::bf16: {
        uint16_t h;
        std::memcpy(&h, p, 2);
        out[i] = bf16_to_f32(h);
        break;
      }
      case DType::i32: {
        int32_t x;
        std::memcpy(&x, p, 4);
        out[i] = x;
        break;
      }
      case DType::b8: out[i] = *p != 0; break;
      case DType::c64: {
        float f;
        std::memcpy(&f, p, 4);
        out[i] = f;
        break;
      }
      case DType::c128: std::memcpy(&out[i], p, 8); break;
      default:
        if (is_float8(dt)) {
          out[i] = f8_to_f32(dt, *p);
        } else {  // integers: sign- or zero-extended
          int64_t x = 0;
          std::memcpy(&x, p, itemsize(dt));
          x = wrap_int(dt, x);
          out[i] = dt == DType::u64 ? static_cast<double>(static_cast<uint64_t>(x))
                                    : static_cast<double>(x);
        }
    }
  }
  return out;
}

// A scratch array holding `values`, registered; returns its handle.
inline int32_t make_array(DType dtype, const std::vector<int64_t>& shape,
                          const std::vector<double>& values) {
  EXPECT_EQ(static_cast<int64_t>(values.size()), numel_of(shape));
  auto arr = StoredArray::create_scratch(ArrayInfo{dtype, shape}, "input");
  arr->write_elems(encode(dtype, values).data(), 0, static_cast<int64_t>(values.size()));
  return Registry::instance().add(arr);
}

// The contents of an array, read without going through the ops under test.
// The array of an existing .npy file, or of a raw file at `offset`.
inline ArrayRef open_npy(const std::string& path, bool writable) {
  return StoredArray::open(path, "npy", OpenOptions{writable, std::nullopt, 0});
}
inline ArrayRef open_raw(const std::string& path, const ArrayInfo& info, uint64_t offset,
                         bool writable) {
  return StoredArray::open(path, "raw", OpenOptions{writable, info, offset});
}

inline std::vector<double> array_values(const StoredArray& arr) {
  std::vector<unsigned char> bytes(arr.info().nbytes());
  arr.read_elems(bytes.data(), 0, arr.info().numel());
  return decode(arr.info().dtype, bytes.data(), arr.info().numel());
}

inline std::vector<double> array_values(int32_t handle) {
  return array_values(*Registry::instance().get(handle));
}

inline std::vector<int64_t> array_shape(int32_t handle) {
  return Registry::instance().get(handle)->info().shape;
}

// Small whole numbers in [-range, range], scattered by a multiplicative hash
// so that neighbouring elements differ. Exact in every dtype, bfloat16
// included, so results computed from them compare exactly.
inline double test_value(int64_t i, int salt = 0, int range = 6) {
  uint64_t h = (static_cast<uint64_t>(i) + 1) * 2654435761u + static_cast<uint64_t>(salt) * 40503u;
  return static_cast<double>(static_cast<int64_t>((h >> 7) % static_cast<uint64_t>(2 * range + 1)) -
                             range);
}

inline std::vector<double> test_values(int64_t n, int salt = 0, int range = 6,
                                       double offset = 0.0) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = test_value(i, salt, range) + offset;
  return v;
}

// An elementwise program's typed call as jask/ops/_elementwise.py `encode`
// writes it (ElementwiseParams in kernels/ops.cpp): the output shape, each
// in-memory operand's dtype and shape, and the program's fields. Registers
// 0 .. n_operands - 1 are the operands (disk arrays, in-memory arrays,
// scalars, in that order); instruction j writes register n_operands + j.
struct ProgramBuilder {
  std::vector<int64_t> out_shape = {};
  int32_t n_operands = 0;
  DType out_dtype = DType::f32;
  Reduction reduction = Reduction::kNone;
  std::vector<std::pair<DType, std::vector<int64_t>>> memory = {};  // in-memory operands
  std::vector<Instr> code = {};
  std::vector<int32_t> outputs = {};  // registers stored; default: the last instruction's

  int32_t add(Opcode op, int32_t a, int32_t b = 0, int32_t c = 0) {
    const int32_t dst = n_operands + static_cast<int32_t>(code.size());
    code.push_back(Instr{op, dst, a, b, c});
    return dst;
  }

  ProgramCode program() const {
    ProgramCode p{n_operands + static_cast<int64_t>(code.size()),
                  out_dtype,
                  static_cast<int64_t>(reduction),
                  {},
                  {},
                  {},
                  {},
                  {},
                  {}};
    for (int32_t r : outputs) p.out_regs.push_back(r);
    if (p.out_regs.empty()) p.out_regs.push_back(code.empty() ? 0 : code.back().dst);
    for (const Instr& in : code) {
      p.op.push_back(static_cast<int64_t>(in.op));
      p.dst.push_back(in.dst);
      p.a.push_back(in.a);
      p.b.push_back(in.b);
      p.c.push_back(in.c);
    }
    return p;
  }

  // The map kernels' fields (without the label, which names the op).
  Attrs params() const {
    const ProgramCode p = program();
    Attrs a{{"shape", out_shape},
            {"n_regs", p.n_regs},
            {"out_dtype", static_cast<int64_t>(p.out_dtype)},
            {"reduction", p.reduction},
            {"out_regs", p.out_regs},
            {"op", p.op},
            {"dst", p.dst},
            {"a", p.a},
            {"b", p.b},
            {"c", p.c},
            {"scalar_dtypes", p.scalar_dtypes}};
    std::vector<int64_t> dtypes, ranks, dims;
    for (const auto& [dt, shape] : memory) {
      dtypes.push_back(static_cast<int64_t>(dt));
      ranks.push_back(static_cast<int64_t>(shape.size()));
      dims.insert(dims.end(), shape.begin(), shape.end());
    }
    a["memory_dtypes"] = dtypes;
    a["memory_ranks"] = ranks;
    a["memory_dims"] = dims;
    return a;
  }
};

// Each reduction of the engine's table (program/reduction.hpp) written as a
// plain loop over the values, as a reference independent of the table.
inline const std::map<std::string, std::function<double(const std::vector<double>&)>>&
reduction_references() {
  static const std::map<std::string, std::function<double(const std::vector<double>&)>> refs = {
      {"sum",
       [](const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0); }},
      {"max", [](const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); }},
      {"min", [](const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); }},
      {"prod",
       [](const std::vector<double>& v) {
         return std::accumulate(v.begin(), v.end(), 1.0, std::multiplies<double>());
       }},
  };
  return refs;
}

// A call of `kernel` through the registry, as the entry points make it.
inline KernelResult run_call(ResultKind kind, const std::string& kernel,
                             std::vector<int32_t> handles, std::vector<double> scalars,
                             std::vector<MemoryOperand> memory, Attrs attrs) {
  return run_kernel(kind, KernelCall{kernel,
                                     {std::move(handles), std::move(scalars), std::move(memory)},
                                     std::move(attrs)});
}
inline int32_t array_op(const std::string& kernel, std::vector<int32_t> handles,
                        std::vector<double> scalars, std::vector<MemoryOperand> memory,
                        Attrs attrs) {
  return run_call(ResultKind::kArray, kernel, std::move(handles), std::move(scalars),
                  std::move(memory), std::move(attrs))
      .handles.at(0);
}

// The map kernels with a label `name`, as the tests call them.
inline Attrs labelled(Attrs attrs, const std::string& name) {
  attrs["label"] = name;
  return attrs;
}
inline int32_t run_map(const std::string& name, std::vector<int32_t> handles,
                       std::vector<MemoryOperand> memory, std::vector<double> scalars,
                       const Attrs& params) {
  return run_call(ResultKind::kArray, "map", std::move(handles), std::move(scalars),
                  std::move(memory), labelled(params, name))
      .handles.at(0);
}
inline std::vector<int32_t> run_map_multi(const std::string& name, std::vector<int32_t> handles,
                                          std::vector<MemoryOperand> memory,
                                          std::vector<double> scalars, const Attrs& params) {
  return run_call(ResultKind::kArrays, "map_multi", std::move(handles), std::move(scalars),
                  std::move(memory), labelled(params, name))
      .handles;
}
inline double run_map_reduce(const std::string& name, std::vector<int32_t> handles,
                             std::vector<MemoryOperand> memory, std::vector<double> scalars,
                             const Attrs& params) {
  return run_call(ResultKind::kScalar, "map_reduce", std::move(handles), std::move(scalars),
                  std::move(memory), labelled(params, name))
      .values.at(0);
}

// Runs `fn`, expecting exception E whose message contains every `needle`.
template <class E, class Fn>
void expect_error_mentioning(Fn fn, const std::vector<std::string>& needles) {
  try {
    fn();
    ADD_FAILURE() << "no exception thrown";
  } catch (const E& e) {
    for (const auto& needle : needles) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)
          << "'" << needle << "' not in: " << e.what();
    }
  }
}

// Pipeline tasks (blocks or tiles) run since construction.
class TaskCount {
 public:
  uint64_t delta() const { return pipeline_tasks_run() - before_; }

 private:
  uint64_t before_ = pipeline_tasks_run();
};

}  // namespace jask::test
