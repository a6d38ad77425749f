// Matrix multiply for in-memory tiles. Uses OpenBLAS (the scipy-openblas32
// wheel, loaded at run time by path) when available, else a portable
// blocked loop. Row-major: C = alpha*op(A)*op(B) + beta*C.
#pragma once
#include <cstdint>
#include <string>

namespace jask {

// Loads the BLAS shared library; returns false (and keeps the fallback) if
// the library or its symbols are missing.
bool load_blas(const std::string& library_path, int num_threads);
bool blas_loaded();

void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
          const float* b, int64_t ldb, float beta, float* c, int64_t ldc);
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const double* a, int64_t lda,
          const double* b, int64_t ldb, double beta, double* c, int64_t ldc);
// Integers (int64 register values): exact, every product and sum wrapping modulo 2^64 as
// XLA's integer dot does (the caller wraps on to the dtype's width). A plain loop, no BLAS.
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const int64_t* a,
          int64_t lda, const int64_t* b, int64_t ldb, int64_t beta, int64_t* c, int64_t ldc);

}  // namespace jask
