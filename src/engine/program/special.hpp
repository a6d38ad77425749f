// Special functions the C++ library lacks (or has only in a thread-unsafe
// form), in double, for the elementwise instructions of program.cpp.
#pragma once
#include <cmath>
#include <limits>

namespace jask {

// The inverse of erf on [-1, 1]: Giles' single-precision approximation
// ("Approximating the erfinv function", GPU Computing Gems, 2011) refined by
// two Newton steps to double precision.
inline double erf_inv(double y) {
  if (std::isnan(y) || std::abs(y) > 1) return std::numeric_limits<double>::quiet_NaN();
  if (std::abs(y) == 1) return std::copysign(std::numeric_limits<double>::infinity(), y);
  if (y == 0) return y;
  double w = -std::log((1.0 - y) * (1.0 + y)), p;
  if (w < 5.0) {
    w -= 2.5;
    p = 2.81022636e-08;
    for (double k : {3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087, -0.00125372503,
                     -0.00417768164, 0.246640727, 1.50140941})
      p = k + p * w;
  } else {
    w = std::sqrt(w) - 3.0;
    p = -0.000200214257;
    for (double k : {0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773, -0.0076224613,
                     0.00943887047, 1.00167406, 2.83297682})
      p = k + p * w;
  }
  double x = p * y;
  const double two_over_sqrt_pi = 1.1283791670955126;
  for (int step = 0; step < 2; ++step) {
    const double slope = two_over_sqrt_pi * std::exp(-x * x);
    if (slope == 0) break;
    x -= (std::erf(x) - y) / slope;
  }
  return x;
}

// log |Gamma(x)|; lgamma_r does not write the global signgam (threads share it).
inline double log_gamma(double x) {
  int sign = 0;
  return ::lgamma_r(x, &sign);
}

// psi(x) = d/dx log Gamma(x); NaN at the poles (0 and the negative integers),
// as jax.scipy.special.digamma gives.
inline double digamma(double x) {
  if (std::isnan(x) || x == -std::numeric_limits<double>::infinity())
    return std::numeric_limits<double>::quiet_NaN();
  if (x <= 0 && x == std::floor(x)) return std::numeric_limits<double>::quiet_NaN();
  if (x < 0) return digamma(1.0 - x) - M_PI / std::tan(M_PI * x);  // reflection
  double result = 0;
  for (; x < 10.0; x += 1.0) result -= 1.0 / x;
  const double f = 1.0 / (x * x);
  const double series =
      f * (1.0 / 12 - f * (1.0 / 120 - f * (1.0 / 252 - f * (1.0 / 240 - f * (1.0 / 132)))));
  return result + std::log(x) - 0.5 / x - series;
}

// psi'(x), the derivative of digamma (polygamma(1, x)); +inf at the poles.
inline double trigamma(double x) {
  if (std::isnan(x) || x == -std::numeric_limits<double>::infinity())
    return std::numeric_limits<double>::quiet_NaN();
  if (x <= 0 && x == std::floor(x)) return std::numeric_limits<double>::infinity();
  if (x < 0) {  // reflection: psi'(1 - x) + psi'(x) = pi^2 / sin^2(pi x)
    const double s = std::sin(M_PI * x);
    return M_PI * M_PI / (s * s) - trigamma(1.0 - x);
  }
  double result = 0;
  for (; x < 10.0; x += 1.0) result += 1.0 / (x * x);
  const double f = 1.0 / (x * x);
  const double series =
      1.0 / x + f / 2 + f / x * (1.0 / 6 - f * (1.0 / 30 - f * (1.0 / 42 - f * (1.0 / 30))));
  return result + series;
}

// Rounds halves to the even neighbour, whatever the floating-point
// environment's rounding mode.
template <class C>
C round_half_even(C x) {
  const C r = std::round(x);
  if (std::abs(x - std::trunc(x)) == C(0.5)) return C(2) * std::round(x / C(2));
  return r;
}

}  // namespace jask
