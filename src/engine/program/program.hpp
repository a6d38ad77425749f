// Elementwise programs: a short list of instructions over registers, run
// chunk by chunk over each block. One program is one pass over the data, so
// a chain of elementwise ops (and a reduction at its end) reads each input
// once and writes nothing in between.
//
// Registers: inputs first (loaded from each block), then scalar operands
// (broadcast once), then temporaries. Every register has a dtype, as the
// value it holds has in JAX: an input's storage dtype, a scalar's declared
// dtype, and for a temporary the dtype its instruction gives (jax.lax's
// rules: operands of one dtype, comparisons give bool, conversions name
// theirs). Each instruction computes in its operands' dtype the way XLA's
// CPU backend does: integers in their width with wraparound (held in int64
// registers, sign- or zero-extended, wrapped after every instruction),
// float16, bfloat16 and the float8s in float rounded after every
// instruction, float32 in float, float64 in double, complex64 and complex128
// in complex<double> (complex64 rounded after every instruction; copy,
// conversions, neg, add, sub, mul, div, exp, eq, ne and select only, and no
// reductions: other complex work is XLA's, through the Python layer's route).
#pragma once
#include <complex>
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
  kCbrt,
  kAbs,
  kSign,
  kExp,
  kExp2,
  kLog,
  kLog1p,
  kExpm1,
  kTanh,
  kSigmoid,
  kRelu,
  kSoftplus,
  kGelu,
  kReciprocal,
  kSin,
  kCos,
  kTan,
  kAsin,
  kAcos,
  kAtan,
  kSinh,
  kCosh,
  kAsinh,
  kAcosh,
  kAtanh,
  kErf,
  kErfc,
  kErfInv,
  kLgamma,
  kDigamma,
  kTrigamma,  // polygamma(1, x): digamma's derivative
  kFloor,
  kCeil,
  kRound,      // halves away from zero (lax.round's rounding_method 0)
  kRoundEven,  // halves to even (rounding_method 1)
  kIsFinite,   // bool result
  kNot,        // bitwise on int32, logical on bool
  // conversions (jax.lax.convert_element_type): dst's dtype is in the name
  kToF32,
  kToF64,
  kToF16,
  kToBf16,
  kToI32,
  kToBool,
  // binary: dst = f(a, b)
  kAdd,
  kSub,
  kMul,
  kDiv,
  kRem,
  kMax,
  kMin,
  kPow,
  kAtan2,
  kNextafter,
  kLt,
  kLe,
  kGt,
  kGe,
  kEq,
  kNe,
  kAnd,  // bitwise on int32, logical on bool (as are or and xor)
  kOr,
  kXor,
  kShiftLeft,
  kShiftRightLogical,
  kShiftRightArithmetic,
  // ternary
  kSelect,  // dst = a != 0 ? b : c (a bool or int32)
  kClamp,   // dst = min(max(b, a), c): jax.lax.clamp(a, b, c)
  // conversions to the dtypes added after the first six (codes appended: stable)
  kToI8,
  kToI16,
  kToI64,
  kToU8,
  kToU16,
  kToU32,
  kToU64,
  kToF8E4M3Fn,
  kToF8E5M2,
  kToF8E4M3Fnuz,
  kToF8E5M2Fnuz,
  kToF8E4M3B11Fnuz,
  kToF8E4M3,
  kToF8E3M4,
  kToC64,
  kToC128,
};
std::vector<std::pair<std::string, int>> opcode_table();
Opcode opcode_from_name(const std::string& name);  // ValueError if unknown
const char* opcode_name(Opcode op);

struct Instr {
  Opcode op;
  int32_t dst, a, b, c;
};

// A program as a call states it (typed fields, see kernels/ops.cpp):
// instruction i is (op[i], dst[i], a[i], b[i], c[i]); out_regs[0] is the
// output register and any further ones are more outputs. scalar_dtypes gives
// each scalar register's dtype code (none: every scalar has out_dtype).
struct ProgramCode {
  int64_t n_regs = 0;
  DType out_dtype = DType::f32;
  int64_t reduction = 0;
  std::vector<int64_t> out_regs, op, dst, a, b, c;
  std::vector<int64_t> scalar_dtypes = {};
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
  // The scalar registers' dtypes; empty: each has out_dtype.
  std::vector<DType> scalar_dtypes = {};

  // The program `code` states, checked: registers in range (inputs, then
  // scalars, then temporaries), known opcodes and reduction; ValueError otherwise.
  static Program build(const ProgramCode& code, size_t n_inputs, size_t n_scalars);
  size_t n_outputs() const { return reduction == Reduction::kNone ? 1 + more_out_regs.size() : 0; }
  // Each register's dtype given the inputs': ValueError naming the instruction
  // whose operands jax.lax would refuse (dtypes that differ, sin of an int32).
  std::vector<DType> register_dtypes(const std::vector<DType>& input_dtypes) const;
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
  // The reduction's value: for an integer register an exact fold in its width (sums and
  // products wrap as XLA's do), as a double.
  double reduced() const;

 private:
  void run_chunks(const std::vector<const void*>& inputs, const std::vector<void*>& outs,
                  int64_t count);
  template <class C>
  void fold(const C* values, int64_t n);
  void* reg(int32_t r) const { return slots_[static_cast<size_t>(r)]; }
  const Program& program_;
  std::vector<DType> input_dtypes_;
  std::vector<DType> reg_dtypes_;
  // Register storage by compute type: float (float32, float16, bfloat16, float8s),
  // double (float64), int64 (every integer dtype, and bool as 0 or 1).
  std::vector<float> fregs_;
  std::vector<double> dregs_;
  std::vector<int64_t> iregs_;
  std::vector<std::complex<double>> cregs_;
  std::vector<int64_t> staging_;  // an output chunk converted to the output's dtype
  std::vector<void*> slots_;      // each register's chunk
  double acc_;
  int64_t iacc_ = 0;  // the reduction of an integer register
};

}  // namespace jask
