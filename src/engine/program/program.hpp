// Elementwise programs: a short list of instructions over registers, run
// chunk by chunk over each block. One program is one pass over the data, so
// a chain of elementwise ops (and a reduction at its end) reads each input
// once and writes nothing in between.
//
// Registers: inputs first (loaded from each block), then scalar operands
// (broadcast once), then temporaries.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/dtype.hpp"
#include "program/reduction.hpp"

namespace jask {

enum class Opcode : int32_t {
  // unary: dst = f(a)
  kCopy,
  kNeg,
  kSquare,
  kSqrt,
  kRsqrt,
  kAbs,
  kSign,
  kExp,
  kLog,
  kLog1p,
  kExpm1,
  kTanh,
  kSigmoid,
  kRelu,
  kSoftplus,
  kGelu,
  kReciprocal,
  kNot,
  kSin,
  kCos,
  // binary: dst = f(a, b)
  kAdd,
  kSub,
  kMul,
  kDiv,
  kMax,
  kMin,
  kPow,
  kLt,
  kLe,
  kGt,
  kGe,
  kEq,
  kNe,
  kAnd,
  kOr,
  // ternary: dst = a != 0 ? b : c
  kSelect,
};
std::vector<std::pair<std::string, int>> opcode_table();
Opcode opcode_from_name(const std::string& name);  // ValueError if unknown

struct Instr {
  Opcode op;
  int32_t dst, a, b, c;
};

// A program as a call states it (typed fields, see kernels/ops.cpp):
// instruction i is (op[i], dst[i], a[i], b[i], c[i]); out_regs[0] is the
// output register and any further ones are more outputs.
struct ProgramCode {
  int64_t n_regs = 0;
  DType out_dtype = DType::f32;
  int64_t reduction = 0;
  std::vector<int64_t> out_regs, op, dst, a, b, c;
};

struct Program {
  int32_t n_regs;
  DType out_dtype;
  Reduction reduction;
  int32_t out_reg;
  std::vector<Instr> code;
  // Registers stored to further outputs of the same dtype (a program with
  // several results: one pass writes them all).
  std::vector<int32_t> more_out_regs = {};

  // The program `code` states, checked: registers in range (inputs, then
  // scalars, then temporaries), known opcodes and reduction; ValueError otherwise.
  static Program build(const ProgramCode& code, size_t n_inputs, size_t n_scalars);
  size_t n_outputs() const { return reduction == Reduction::kNone ? 1 + more_out_regs.size() : 0; }
};

// Runs a program on blocks; holds the registers (one chunk each).
class ProgramRunner {
 public:
  ProgramRunner(const Program& program, std::vector<DType> input_dtypes,
                std::vector<double> scalars);
  // Evaluates `count` elements; stores to `out` (reduction kNone) or folds
  // into the running reduction.
  void run(const std::vector<const void*>& inputs, void* out, int64_t count);
  // The same with one destination per output (Program::n_outputs()).
  void run(const std::vector<const void*>& inputs, const std::vector<void*>& outs, int64_t count);
  double reduced() const { return acc_; }
  bool uses_double() const { return wide_; }

 private:
  template <class C>
  void run_typed(const std::vector<const void*>& inputs, const std::vector<void*>& outs,
                 int64_t count);
  const Program& program_;
  std::vector<DType> input_dtypes_;
  std::vector<double> scalars_;
  bool wide_;
  std::vector<float> fregs_;
  std::vector<double> dregs_;
  double acc_;
  bool any_ = false;
};

}  // namespace jask
