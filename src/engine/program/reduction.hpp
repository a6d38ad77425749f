// The reductions: each one's identity and fold, written once. A full
// reduction at the end of an elementwise program (ProgramRunner), a reduction
// over axes (AxisReducer) and the cumulative reductions fold floats through
// this table, in double, and integers through IntFold, exactly.
// A new reduction is one enum value, one row and one IntFold case.
#pragma once
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>

#include "base/dtype.hpp"
#include "base/errors.hpp"

namespace jask {

enum class Reduction : int32_t { kNone = 0, kSum = 1, kMax = 2, kMin = 3, kProd = 4 };

struct ReductionRule {
  Reduction kind;
  const char* name;
  double identity;
  // Associative (up to rounding): blocks and lanes are folded in any grouping.
  double (*fold)(double acc, double v);
};

// NaN wins in max and min, as in jnp.max / jnp.min.
inline constexpr ReductionRule kReductions[] = {
    {Reduction::kSum, "sum", 0.0, [](double acc, double v) { return acc + v; }},
    {Reduction::kMax, "max", -std::numeric_limits<double>::infinity(),
     [](double acc, double v) { return acc != acc            ? acc
                                       : (v != v || v > acc) ? v
                                                             : acc; }},
    {Reduction::kMin, "min", std::numeric_limits<double>::infinity(),
     [](double acc, double v) { return acc != acc            ? acc
                                       : (v != v || v < acc) ? v
                                                             : acc; }},
    {Reduction::kProd, "prod", 1.0, [](double acc, double v) { return acc * v; }},
};

// The reduction with code `code` (kNone only if `allow_none`); ValueError naming `what`.
inline Reduction reduction_from_code(int64_t code, const std::string& what, bool allow_none) {
  if (allow_none && code == static_cast<int64_t>(Reduction::kNone)) return Reduction::kNone;
  for (const ReductionRule& r : kReductions) {
    if (code == static_cast<int64_t>(r.kind)) return r.kind;
  }
  throw ValueError(what + ": unknown reduction " + std::to_string(code));
}

inline const ReductionRule& reduction_rule(Reduction kind) {
  for (const ReductionRule& r : kReductions) {
    if (r.kind == kind) return r;
  }
  throw ValueError("no rule for reduction " + std::to_string(static_cast<int>(kind)));
}

// Calls f(rule) with the rule of `kind` as a compile-time constant (an
// integral_constant indexing kReductions), so that the fold inlines into a
// hot loop: `with_reduction(kind, [&](auto i) { constexpr auto& r = kReductions[i]; ... })`.
template <class F>
void with_reduction(Reduction kind, F&& f) {
  const bool found = [&]<size_t... I>(std::index_sequence<I...>) {
    return (
        (kind == kReductions[I].kind ? (f(std::integral_constant<size_t, I>{}), true) : false) ||
        ...);
  }
  (std::make_index_sequence<std::size(kReductions)>{});
  if (!found) throw ValueError("unknown reduction " + std::to_string(static_cast<int>(kind)));
}

// Row I's fold as a function object (the row's index a compile-time constant, so that the fold
// inlines into a hot loop).
template <size_t I>
struct TableFold {
  double operator()(double acc, double v) const { return kReductions[I].fold(acc, v); }
};

// Whether values of `dt` fold as integers (IntFold) rather than in double.
inline bool folds_as_int(DType dt) { return is_integer(dt) || dt == DType::b8; }

// The integer fold of reduction R, on values held in int64 (each integer dtype's values sign- or
// zero-extended, uint64's as their bits; bool's as 0 or 1), compared as U (int64_t or uint64_t).
// Sums and products wrap modulo 2^64, and storing the result (wrap_int) wraps it on to the
// dtype's width: both as XLA's integer arithmetic, whatever the grouping.
template <Reduction R, class U>
struct IntFold {
  int64_t operator()(int64_t acc, int64_t v) const {
    const auto a = static_cast<uint64_t>(acc), b = static_cast<uint64_t>(v);
    if constexpr (R == Reduction::kSum) return static_cast<int64_t>(a + b);
    if constexpr (R == Reduction::kProd) return static_cast<int64_t>(a * b);
    if constexpr (R == Reduction::kMax) return U(v) > U(acc) ? v : acc;
    if constexpr (R == Reduction::kMin) return U(v) < U(acc) ? v : acc;
  }
};

// The identity of integer reduction `kind` in dtype `dt` (a register value): the smallest and
// largest value of dt's own range for max and min, so that an empty fold stores as jnp's.
inline int64_t int_identity(Reduction kind, DType dt) {
  const bool is_unsigned = dtype_kind(dt) == DKind::kUnsigned || dt == DType::b8;
  const int bits = int_bits(dt);
  switch (kind) {
    case Reduction::kSum: return 0;
    case Reduction::kProd: return 1;
    case Reduction::kMax:
      return is_unsigned  ? 0
             : bits == 64 ? std::numeric_limits<int64_t>::min()
                          : -(int64_t{1} << (bits - 1));
    case Reduction::kMin:
      if (is_unsigned) return bits == 64 ? int64_t{-1} : (int64_t{1} << bits) - 1;
      return bits == 64 ? std::numeric_limits<int64_t>::max() : (int64_t{1} << (bits - 1)) - 1;
    case Reduction::kNone: break;
  }
  throw ValueError("no identity for reduction " + std::to_string(static_cast<int>(kind)));
}

// Calls f(fold) with IntFold for `kind` and the signedness of integer (or bool) dtype `dt`,
// a function object whose call inlines into a hot loop.
template <class F>
void with_int_fold(Reduction kind, DType dt, F&& f) {
  auto typed = [&]<class U>() {
    switch (kind) {
      case Reduction::kSum: return f(IntFold<Reduction::kSum, U>{});
      case Reduction::kProd: return f(IntFold<Reduction::kProd, U>{});
      case Reduction::kMax: return f(IntFold<Reduction::kMax, U>{});
      case Reduction::kMin: return f(IntFold<Reduction::kMin, U>{});
      case Reduction::kNone: break;
    }
    throw ValueError("unknown reduction " + std::to_string(static_cast<int>(kind)));
  };
  if (dtype_kind(dt) == DKind::kUnsigned)
    typed.template operator()<uint64_t>();
  else
    typed.template operator()<int64_t>();
}

}  // namespace jask
