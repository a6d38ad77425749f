#include "kernels/batched_matmul.hpp"

#include <algorithm>

#include "base/errors.hpp"
#include "exec/pipeline.hpp"
#include "kernels/blas.hpp"
#include "kernels/kernels.hpp"
#include "plan/planner.hpp"
#include "program/reduction.hpp"
#include "storage/hyperslab.hpp"

namespace jask {

namespace {

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
  return s + ")";
}

int64_t product(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

}  // namespace

BatchBroadcast::BatchBroadcast(const std::vector<int64_t>& a_batch,
                               const std::vector<int64_t>& b_batch, const std::string& operands) {
  const size_t nd = std::max(a_batch.size(), b_batch.size());
  auto dim = [nd](const std::vector<int64_t>& s, size_t d) {  // right-aligned; missing axes are 1
    return d < nd - s.size() ? int64_t{1} : s[d - (nd - s.size())];
  };
  shape_.assign(nd, 1);
  a_stride_.assign(nd, 0);
  b_stride_.assign(nd, 0);
  int64_t a_step = 1, b_step = 1;
  for (size_t d = nd; d-- > 0;) {
    const int64_t da = dim(a_batch, d), db = dim(b_batch, d);
    if (da != db && da != 1 && db != 1) {
      throw ValueError(operands + ": batch dimensions " + shape_text(a_batch) + " and " +
                       shape_text(b_batch) + " do not broadcast");
    }
    shape_[d] = da == 1 ? db : da;
    a_stride_[d] = da == 1 ? 0 : a_step;  // stride 0: the same matrix for every index
    b_stride_[d] = db == 1 ? 0 : b_step;
    a_step *= da;
    b_step *= db;
  }
}

int64_t BatchBroadcast::count() const { return product(shape_); }

int64_t BatchBroadcast::operand_matrix(int64_t out, const std::vector<int64_t>& stride) const {
  int64_t matrix = 0;
  for (size_t d = shape_.size(); d-- > 0;) {
    matrix += (out % shape_[d]) * stride[d];
    out /= shape_[d];
  }
  return matrix;
}

namespace {

// One operand viewed as a stack of stored matrices and the op(X) = X or X^T
// each stands for.
struct MatOperand {
  ArrayRef array;
  std::vector<int64_t> stored;  // {matrices, rows, cols}: a view of the file
  bool trans;
  int64_t rows() const { return trans ? stored[2] : stored[1]; }
  int64_t cols() const { return trans ? stored[1] : stored[2]; }
  // The stored slab holding op(X)[r0:r0+nr, c0:c0+nc] of `count` consecutive matrices.
  Slab slab(int64_t first, int64_t count, int64_t r0, int64_t nr, int64_t c0, int64_t nc) const {
    return trans ? Slab{{first, c0, r0}, {count, nc, nr}} : Slab{{first, r0, c0}, {count, nr, nc}};
  }
  // Reads that slab into dst, one tile after another; tiles are stored
  // untransposed, so their leading dimension is the stored column extent (returned).
  int64_t read(int64_t first, int64_t count, int64_t r0, int64_t nr, int64_t c0, int64_t nc,
               void* dst) const {
    const Slab s = slab(first, count, r0, nr, c0, nc);
    read_slab(*array, stored, s, dst);
    return s.extent[2];
  }
};

// An operand's batch axes and its matrices. A 1-D operand is one row vector
// on the left, one column vector on the right, and is never transposed.
std::pair<std::vector<int64_t>, MatOperand> as_matrices(ArrayRef array, bool left, bool trans) {
  const std::vector<int64_t>& shape = array->info().shape;
  if (shape.size() == 1) {
    std::vector<int64_t> stored =
        left ? std::vector<int64_t>{1, 1, shape[0]} : std::vector<int64_t>{1, shape[0], 1};
    return {{}, MatOperand{std::move(array), stored, false}};
  }
  std::vector<int64_t> batch(shape.begin(), shape.end() - 2);
  std::vector<int64_t> stored{product(batch), shape[shape.size() - 2], shape.back()};
  return {batch, MatOperand{std::move(array), stored, trans}};
}

// The double-buffered tiles of one operand for a group of output matrices,
// and which tiles each slot holds (tiles already in a slot are not read
// again: B is read once when it fits, also across output matrices sharing it).
class OperandTiles {
 public:
  // `bytes` per slot; `in_place`: each slot also has the pages a tile of
  // `rows` stored rows needs to be read in place (in_place_bytes), and a
  // single stored matrix's tile of strided rows is read so (no bounce
  // buffer, no copy; its leading dimension is then the layout's pitch).
  OperandTiles(int64_t bytes, bool in_place, int64_t rows) : in_place_(in_place) {
    if (in_place) bytes = std::max(bytes, in_place_bytes(rows, bytes / std::max<int64_t>(rows, 1)));
    for (auto& s : slot_) s = AlignedBuffer(static_cast<size_t>(bytes));
  }
  // Loads tile (r0, c0) of the stored matrices `matrices` (one per output
  // matrix of the task) into slot `slot`, widened to the compute type.
  // Consecutive matrices are read as one run; a repeated one (a broadcast
  // batch axis) is read once per run of repeats.
  void load(const MatOperand& X, const std::vector<int64_t>& matrices, int64_t r0, int64_t nr,
            int64_t c0, int64_t nc, DType dt, size_t cs, int slot) {
    Loaded& held = held_[slot];
    if (held.matrices == matrices && held.r0 == r0 && held.c0 == c0) return;
    const int64_t tile = nr * nc, ss = static_cast<int64_t>(itemsize(dt));
    held.lead = 0;
    if (in_place_ && matrices.size() == 1 && ss == static_cast<int64_t>(cs)) {
      const Slab s = X.slab(matrices[0], 1, r0, nr, c0, nc);
      const std::optional<InPlaceLayout> layout = in_place_layout(*X.array, X.stored, s);
      if (layout && layout->bytes <= static_cast<int64_t>(slot_[slot].size())) {
        held.matrices.clear();  // a failed read leaves the slot holding nothing
        read_slab_in_place(*X.array, X.stored, s, *layout, slot_[slot].data());
        held.tile_of.assign(1, 0);
        held.ld = layout->pitch / ss;
        held.lead = layout->lead;
        held.matrices = matrices;
        held.r0 = r0;
        held.c0 = c0;
        return;
      }
    }
    std::vector<int64_t>& at = held.tile_of;
    at.assign(matrices.size(), 0);
    int64_t tiles = 0;
    for (size_t q = 0; q < matrices.size(); ++q) {
      at[q] = q > 0 && matrices[q] == matrices[q - 1] ? at[q - 1] : tiles++;
    }
    // Storage lands in the back of the buffer and is widened in place.
    auto* storage = reinterpret_cast<unsigned char*>(slot_[slot].data()) +
                    tiles * tile * (static_cast<int64_t>(cs) - ss);
    for (size_t q = 0; q < matrices.size();) {
      size_t end = q + 1;
      while (end < matrices.size() && matrices[end] == matrices[end - 1] + 1) ++end;
      held.ld = X.read(matrices[q], static_cast<int64_t>(end - q), r0, nr, c0, nc,
                       storage + at[q] * tile * ss);
      for (q = end; q < matrices.size() && matrices[q] == matrices[q - 1];) ++q;
    }
    widen_in_place(dt, slot_[slot].data(), tiles * tile);
    held.matrices = matrices;
    held.r0 = r0;
    held.c0 = c0;
  }
  // Output matrix q's tile in slot `slot`, and the tiles' leading dimension.
  template <class T>
  const T* tile(int slot, size_t q, int64_t tile_elems) const {
    return reinterpret_cast<const T*>(slot_[slot].data() + held_[slot].lead) +
           held_[slot].tile_of[q] * tile_elems;
  }
  int64_t ld(int slot) const { return held_[slot].ld; }

 private:
  struct Loaded {
    std::vector<int64_t> matrices;
    int64_t r0 = -1, c0 = -1, ld = 0;
    int64_t lead = 0;              // bytes before the tile (read in place)
    std::vector<int64_t> tile_of;  // buffer tile of each output matrix
  };
  bool in_place_;
  AlignedBuffer slot_[kPipelineSlots];
  Loaded held_[kPipelineSlots];
};

// An empty contraction: every output element is zero.
void write_zeros(const StoredArray& out) {
  const int64_t numel = out.info().numel();
  const int64_t isz = static_cast<int64_t>(itemsize(out.info().dtype));
  const int64_t chunk = std::max<int64_t>(1, std::min(numel, memory_budget() / isz));
  std::vector<unsigned char> zero(static_cast<size_t>(chunk * isz), 0);
  for (int64_t first = 0; first < numel; first += chunk) {
    out.write_elems(zero.data(), first, std::min(chunk, numel - first));
  }
}

// Output matrices per task. Products whose tiles are whole matrices go
// several to a task, as many as the budget holds, so small matrices do not
// pay a pipeline step and a read per operand each.
int64_t matrices_per_task(const MatmulTiles& tiles, int64_t M, int64_t K, int64_t N, int64_t count,
                          size_t cs) {
  if (tiles.mb < M || tiles.kb < K || tiles.nb < N || count == 0) return 1;
  const int64_t per_matrix = M * K + K * N + M * N;
  const int64_t cap = memory_budget() / (kPipelineSlots * static_cast<int64_t>(cs));
  return std::clamp<int64_t>(cap / std::max<int64_t>(per_matrix, 1), 1, count);
}

// Tasks run over (group of output matrices, row tile, column tile, K tile)
// in C order; the K tiles of one output tile accumulate into one C slot. A
// strip plan (one product, nb = N) runs over (K tile, row tile) instead: all
// of C in one buffer, each K tile of B read once into slot k % kPipelineSlots.
// With two row tiles or more, B's K tile k + 1 is read with the last row tile
// of K tile k, the only one that may be short, rather than with the first
// of k + 1, which with it took longer than a gemm and left the cores idle
// once per K tile (a capped W3's time past max(read, compute): 0.24 s against
// 0.41 s in ten alternated runs). Its slot is free by then: read(t) starts
// after compute(t - 2), and t - 2 >= the last task of K tile k - 1.
template <class T>
void run_matmul(const MatOperand& A, const MatOperand& B, const BatchBroadcast& batches,
                const StoredArray& out, const std::vector<int64_t>& out3d, DType dt,
                const MatmulTiles& tiles) {
  const int64_t M = A.rows(), K = A.cols(), N = B.cols();
  if (K == 0) return write_zeros(out);
  const int64_t ni = (M + tiles.mb - 1) / tiles.mb, nj = (N + tiles.nb - 1) / tiles.nb,
                nk = (K + tiles.kb - 1) / tiles.kb, per_group = ni * nj * nk;
  const size_t cs = sizeof(T);
  const int64_t group = matrices_per_task(tiles, M, K, N, batches.count(), cs);
  const int64_t n_groups = (batches.count() + group - 1) / group;
  OperandTiles a_tiles(group * tiles.mb * tiles.kb * cs, tiles.a_in_place,
                       A.trans ? tiles.kb : tiles.mb),
      b_tiles(group * tiles.kb * tiles.nb * cs, false, 0);
  // One C buffer when the plan has one output tile: it is written after the last task.
  const int64_t c_slots = tiles.c_slots;
  const bool strip = tiles.strip_rows > 0;
  AlignedBuffer cbuf[kPipelineSlots];
  for (int64_t s = 0; s < c_slots; ++s)
    cbuf[s] = AlignedBuffer(static_cast<size_t>(group * (strip ? M : tiles.mb) * tiles.nb) * cs);
  struct Task {
    int64_t o, g, i, j, k;
  };  // first output matrix, matrices, tile indices
  auto task = [&](int64_t t) {
    const int64_t r = t % per_group, o = t / per_group * group;
    if (strip) return Task{0, 1, r % ni, 0, r / ni};
    return Task{o, std::min(group, batches.count() - o), r / (nj * nk), (r / nk) % nj, r % nk};
  };
  auto ext = [](int64_t idx, int64_t block, int64_t dim) {
    return std::min(block, dim - idx * block);
  };
  auto c_slot = [&](const Task& x) -> std::byte* {
    if (strip) return cbuf[0].data() + static_cast<size_t>(x.i * tiles.mb * tiles.nb) * cs;
    return cbuf[((x.o / group * ni + x.i) * nj + x.j) % c_slots].data();
  };

  auto b_slot = [&](int64_t t, const Task& x) {
    return static_cast<int>((strip ? x.k : t) % kPipelineSlots);
  };
  const bool b_ahead = strip && ni >= 2;

  PipelineStages stages;
  stages.read = [&](int64_t t) {
    Task x = task(t);
    const int slot = static_cast<int>(t % kPipelineSlots);
    std::vector<int64_t> a_matrices(x.g), b_matrices(x.g);
    for (int64_t q = 0; q < x.g; ++q) {
      a_matrices[q] = batches.a_matrix(x.o + q);
      b_matrices[q] = batches.b_matrix(x.o + q);
    }
    const int64_t mi = ext(x.i, tiles.mb, M), kk = ext(x.k, tiles.kb, K),
                  nj_ = ext(x.j, tiles.nb, N);
    a_tiles.load(A, a_matrices, x.i * tiles.mb, mi, x.k * tiles.kb, kk, dt, cs, slot);
    if (!b_ahead) {
      b_tiles.load(B, b_matrices, x.k * tiles.kb, kk, x.j * tiles.nb, nj_, dt, cs, b_slot(t, x));
    } else if (t == 0 || (x.i == ni - 1 && x.k + 1 < nk)) {
      const int64_t k = t == 0 ? 0 : x.k + 1;
      b_tiles.load(B, b_matrices, k * tiles.kb, ext(k, tiles.kb, K), 0, N, dt, cs,
                   static_cast<int>(k % kPipelineSlots));
    }
  };
  stages.compute = [&](int64_t t) {
    Task x = task(t);
    const int slot = static_cast<int>(t % kPipelineSlots);
    const int bs = b_slot(t, x);
    const int64_t mi = ext(x.i, tiles.mb, M), kk = ext(x.k, tiles.kb, K),
                  nj_ = ext(x.j, tiles.nb, N);
    T* c = reinterpret_cast<T*>(c_slot(x));
    for (int64_t q = 0; q < x.g; ++q) {
      gemm(A.trans, B.trans, mi, nj_, kk, a_tiles.tile<T>(slot, q, mi * kk), a_tiles.ld(slot),
           b_tiles.tile<T>(bs, q, kk * nj_), b_tiles.ld(bs), x.k == 0 ? T(0) : T(1),
           c + q * mi * nj_, nj_);
    }
  };
  stages.write = [&](int64_t t) {
    Task x = task(t);
    if (x.k != nk - 1) return;
    const int64_t mi = ext(x.i, tiles.mb, M), nj_ = ext(x.j, tiles.nb, N);
    void* c = c_slot(x);
    narrow_in_place(dt, c, x.g * mi * nj_);
    write_slab(out, out3d, Slab{{x.o, x.i * tiles.mb, x.j * tiles.nb}, {x.g, mi, nj_}}, c);
  };
  run_pipeline(M == 0 || N == 0 ? 0 : n_groups * per_group, stages);
}

}  // namespace

int32_t matmul_arrays(int32_t a, int32_t b, bool trans_a, bool trans_b) {
  Registry& reg = Registry::instance();
  ArrayRef A = reg.get(a), B = reg.get(b);
  const ArrayInfo &ai = A->info(), &bi = B->info();
  std::string desc = "matmul(" + ai.describe() + (trans_a ? "^T" : "") + ", " + bi.describe() +
                     (trans_b ? "^T" : "") + ")";
  if (ai.dtype != bi.dtype) throw TypeError(desc + ": dtypes differ");
  if (ai.shape.empty() || bi.shape.empty())
    throw ValueError(desc + ": operands need at least one axis");
  auto [a_batch, opa] = as_matrices(A, /*left=*/true, trans_a);
  auto [b_batch, opb] = as_matrices(B, /*left=*/false, trans_b);
  if (opa.cols() != opb.rows()) {
    throw ValueError(desc + ": contracted dimensions differ (" + std::to_string(opa.cols()) +
                     " vs " + std::to_string(opb.rows()) + ")");
  }
  BatchBroadcast batches(a_batch, b_batch, desc);
  const int64_t M = opa.rows(), N = opb.cols();
  std::vector<int64_t> out_shape = batches.shape();  // a 1-D operand's axis is dropped, as in numpy
  if (ai.shape.size() >= 2) out_shape.push_back(M);
  if (bi.shape.size() >= 2) out_shape.push_back(N);
  auto out = StoredArray::create_scratch(ArrayInfo{ai.dtype, out_shape}, "matmul",
                                         ScratchContents::kOverwritten);
  const size_t cs = compute_itemsize(ai.dtype);
  MatmulTiles tiles =
      plan_matmul(desc, M, opa.cols(), N, static_cast<int64_t>(cs), batches.count(), !opa.trans);
  const std::vector<int64_t> out3d{batches.count(), M, N};
  if (folds_as_int(ai.dtype)) {
    run_matmul<int64_t>(opa, opb, batches, *out, out3d, ai.dtype, tiles);
  } else if (cs == sizeof(double)) {
    run_matmul<double>(opa, opb, batches, *out, out3d, ai.dtype, tiles);
  } else {
    run_matmul<float>(opa, opb, batches, *out, out3d, ai.dtype, tiles);
  }
  return reg.add(out);
}

}  // namespace jask
