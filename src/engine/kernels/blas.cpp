#include "kernels/blas.hpp"

#include <dlfcn.h>

#include <atomic>

namespace jask {
namespace {

// CBLAS enum values (cblas.h) so no header is needed at build time.
constexpr int kRowMajor = 101, kNoTrans = 111, kTrans = 112;

using SgemmFn = void (*)(int, int, int, int, int, int, float, const float*, int, const float*, int,
                         float, float*, int);
using DgemmFn = void (*)(int, int, int, int, int, int, double, const double*, int, const double*,
                         int, double, double*, int);
using SetThreadsFn = void (*)(int);

std::atomic<SgemmFn> g_sgemm{nullptr};
std::atomic<DgemmFn> g_dgemm{nullptr};

template <class T>
void fallback_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda,
                   const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  for (int64_t i = 0; i < m; ++i) {
    T* crow = c + i * ldc;
    for (int64_t j = 0; j < n; ++j) crow[j] = beta == T(0) ? T(0) : crow[j] * beta;
    for (int64_t p = 0; p < k; ++p) {
      const T av = ta ? a[p * lda + i] : a[i * lda + p];
      if (!tb) {
        const T* brow = b + p * ldb;
        for (int64_t j = 0; j < n; ++j) crow[j] += av * brow[j];
      } else {
        for (int64_t j = 0; j < n; ++j) crow[j] += av * b[j * ldb + p];
      }
    }
  }
}

}  // namespace

bool load_blas(const std::string& library_path, int num_threads) {
  void* lib = dlopen(library_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) return false;
  auto s = reinterpret_cast<SgemmFn>(dlsym(lib, "scipy_cblas_sgemm"));
  auto d = reinterpret_cast<DgemmFn>(dlsym(lib, "scipy_cblas_dgemm"));
  auto threads = reinterpret_cast<SetThreadsFn>(dlsym(lib, "scipy_openblas_set_num_threads"));
  if (s == nullptr || d == nullptr) return false;
  if (threads != nullptr && num_threads > 0) threads(num_threads);
  g_sgemm = s;
  g_dgemm = d;
  return true;  // the library stays loaded for the life of the process
}

bool blas_loaded() { return g_sgemm.load() != nullptr; }

void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
          const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (auto f = g_sgemm.load()) {
    f(kRowMajor, ta ? kTrans : kNoTrans, tb ? kTrans : kNoTrans, int(m), int(n), int(k), 1.0f, a,
      int(lda), b, int(ldb), beta, c, int(ldc));
    return;
  }
  fallback_gemm(ta, tb, m, n, k, a, lda, b, ldb, beta, c, ldc);
}

void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const double* a, int64_t lda,
          const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  if (auto f = g_dgemm.load()) {
    f(kRowMajor, ta ? kTrans : kNoTrans, tb ? kTrans : kNoTrans, int(m), int(n), int(k), 1.0, a,
      int(lda), b, int(ldb), beta, c, int(ldc));
    return;
  }
  fallback_gemm(ta, tb, m, n, k, a, lda, b, ldb, beta, c, ldc);
}

void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const int64_t* a, int64_t lda,
          const int64_t* b, int64_t ldb, int64_t beta, int64_t* c, int64_t ldc) {
  // In uint64 (the same bits; an int64 may be read as its unsigned type): no signed overflow.
  fallback_gemm(ta, tb, m, n, k, reinterpret_cast<const uint64_t*>(a), lda,
                reinterpret_cast<const uint64_t*>(b), ldb, static_cast<uint64_t>(beta),
                reinterpret_cast<uint64_t*>(c), ldc);
}

}  // namespace jask
