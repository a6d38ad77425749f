#include "program/broadcast.hpp"

#include <algorithm>
#include <cstring>

#include "base/errors.hpp"
#include "io/file.hpp"

namespace jask {
namespace {

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "(";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + (s.size() == 1 ? ",)" : ")");
}

// The operand's shape left-padded with 1s to the output's rank.
std::vector<int64_t> padded(const std::vector<int64_t>& shape, size_t rank) {
  std::vector<int64_t> out(rank - shape.size(), 1);
  out.insert(out.end(), shape.begin(), shape.end());
  return out;
}

// Element strides of the operand in output index space: 0 along broadcast axes.
std::vector<int64_t> broadcast_strides(const std::vector<int64_t>& shape,
                                       const std::vector<int64_t>& out) {
  std::vector<int64_t> p = padded(shape, out.size()), strides(out.size());
  int64_t s = 1;
  for (size_t d = out.size(); d-- > 0;) {
    strides[d] = p[d] == 1 ? 0 : s;
    s *= p[d];
  }
  return strides;
}

// Walks output positions [first, first + count) and calls
// fn(position in the block, operand offset, run length, inner stride) for each
// run along the output's last axis; inner stride 1 means the run is contiguous
// in the operand, 0 that one operand value repeats.
template <class Fn>
void walk_runs(const std::vector<int64_t>& out, const std::vector<int64_t>& strides, int64_t first,
               int64_t count, Fn fn) {
  const int nd = static_cast<int>(out.size());
  if (nd == 0) return fn(int64_t{0}, int64_t{0}, count, int64_t{0});
  std::vector<int64_t> idx(nd);
  int64_t rest = first, src = 0;
  for (int d = nd - 1; d >= 0; --d) {
    idx[d] = rest % out[d];
    rest /= out[d];
    src += idx[d] * strides[d];
  }
  const int64_t inner = out[nd - 1], inner_stride = strides[nd - 1];
  for (int64_t done = 0; done < count;) {
    const int64_t run = std::min(inner - idx[nd - 1], count - done);
    fn(done, src, run, inner_stride);
    done += run;
    src += run * inner_stride;
    idx[nd - 1] += run;
    for (int d = nd - 1; d > 0 && idx[d] == out[d]; --d) {  // carry
      src -= idx[d] * strides[d];
      idx[d] = 0;
      ++idx[d - 1];
      src += strides[d - 1];
    }
  }
}

void repeat_value(std::byte* dst, const std::byte* value, int64_t n, size_t isz) {
  for (int64_t j = 0; j < n; ++j) std::memcpy(dst + j * isz, value, isz);
}

// Gathers from the operand's values in memory: a copy Jask loaded (owned,
// counted against the budget), or the caller's buffer (borrowed for the op).
class ResidentReader : public OperandReader {
 public:
  ResidentReader(std::vector<std::byte> owned, const std::byte* borrowed, size_t itemsize,
                 const std::vector<int64_t>& shape, const std::vector<int64_t>& out)
      : owned_(std::move(owned)),
        data_(owned_.empty() ? borrowed : owned_.data()),
        itemsize_(itemsize),
        out_(out),
        strides_(broadcast_strides(shape, out)) {}

  void read(int64_t first, int64_t count, void* dst_v) const override {
    auto* dst = static_cast<std::byte*>(dst_v);
    walk_runs(out_, strides_, first, count,
              [&](int64_t pos, int64_t src, int64_t run, int64_t stride) {
                if (stride == 1)
                  std::memcpy(dst + pos * itemsize_, data_ + src * itemsize_, run * itemsize_);
                else
                  repeat_value(dst + pos * itemsize_, data_ + src * itemsize_, run, itemsize_);
              });
  }

  int64_t resident_bytes() const override { return static_cast<int64_t>(owned_.size()); }

 private:
  std::vector<std::byte> owned_;
  const std::byte* data_;
  size_t itemsize_;
  std::vector<int64_t> out_, strides_;
};

// Reads each run from the file: for operands too large to keep in memory
// whose broadcast is not a plain repeat. Correct for any broadcast; the I/O
// is one request per run of the output's last axis.
class FileGatherReader : public OperandReader {
 public:
  FileGatherReader(ArrayRef array, const std::vector<int64_t>& out)
      : array_(std::move(array)),
        out_(out),
        strides_(broadcast_strides(array_->info().shape, out)) {}

  void read(int64_t first, int64_t count, void* dst_v) const override {
    auto* dst = static_cast<std::byte*>(dst_v);
    const size_t isz = itemsize(array_->info().dtype);
    walk_runs(out_, strides_, first, count,
              [&](int64_t pos, int64_t src, int64_t run, int64_t stride) {
                if (stride == 1) {
                  array_->read_elems(dst + pos * isz, src, run);
                } else {
                  array_->read_elems(dst + pos * isz, src, 1);
                  repeat_value(dst + (pos + 1) * isz, dst + pos * isz, run - 1, isz);
                }
              });
  }

 private:
  ArrayRef array_;
  std::vector<int64_t> out_, strides_;
};

// An operand equal to the output on leading axes and 1 on the trailing
// ones: each of its elements repeats `repeat` times in the output, so a
// block needs one contiguous range of the operand.
class RepeatReader : public OperandReader {
 public:
  RepeatReader(ArrayRef array, int64_t repeat) : array_(std::move(array)), repeat_(repeat) {}

  void read(int64_t first, int64_t count, void* dst_v) const override {
    const size_t isz = itemsize(array_->info().dtype);
    const int64_t lo = first / repeat_, hi = (first + count - 1) / repeat_;
    auto* dst = static_cast<std::byte*>(dst_v);
    std::vector<std::byte> values((hi - lo + 1) * isz);  // at most count / repeat values
    array_->read_elems(values.data(), lo, hi - lo + 1);
    for (int64_t i = 0; i < count; ++i) {
      std::memcpy(dst + i * isz, values.data() + ((first + i) / repeat_ - lo) * isz, isz);
    }
  }

 private:
  ArrayRef array_;
  int64_t repeat_;
};

class DirectReader : public OperandReader {
 public:
  explicit DirectReader(ArrayRef array) : array_(std::move(array)) {}
  void read(int64_t first, int64_t count, void* dst) const override {
    array_->read_elems(dst, first, count);
  }
  int64_t alignment_shift(int64_t first) const override {
    return static_cast<int64_t>(array_->byte_of(first) % kIoAlignment);
  }

 private:
  ArrayRef array_;
};

}  // namespace

std::vector<int64_t> broadcast_shapes(const std::vector<int64_t>& a,
                                      const std::vector<int64_t>& b) {
  const size_t rank = std::max(a.size(), b.size());
  std::vector<int64_t> pa = padded(a, rank), pb = padded(b, rank), out(rank);
  for (size_t d = 0; d < rank; ++d) {
    if (pa[d] != pb[d] && pa[d] != 1 && pb[d] != 1) {
      throw ValueError("shapes " + shape_str(a) + " and " + shape_str(b) + " do not broadcast");
    }
    out[d] = pa[d] == 1 ? pb[d] : pa[d];
  }
  return out;
}

std::unique_ptr<OperandReader> make_reader(ArrayRef array, const std::vector<int64_t>& out_shape,
                                           int64_t resident_limit) {
  const ArrayInfo& info = array->info();
  if (broadcast_shapes(info.shape, out_shape) != out_shape) {
    throw ValueError("an operand of shape " + shape_str(info.shape) + " does not broadcast to " +
                     shape_str(out_shape));
  }
  if (info.shape == out_shape) return std::make_unique<DirectReader>(std::move(array));
  if (static_cast<int64_t>(info.nbytes()) <= resident_limit) {
    std::vector<std::byte> data(info.nbytes());
    array->read_elems(data.data(), 0, info.numel());
    return std::make_unique<ResidentReader>(std::move(data), nullptr, itemsize(info.dtype),
                                            info.shape, out_shape);
  }
  // Large operands that vary only along leading axes repeat each element:
  // one contiguous read per block. Anything else is gathered run by run.
  std::vector<int64_t> p = padded(info.shape, out_shape.size());
  size_t d = 0;
  while (d < p.size() && p[d] == out_shape[d]) ++d;
  int64_t repeat = 1;
  for (size_t e = d; e < p.size(); ++e) {
    if (p[e] != 1) return std::make_unique<FileGatherReader>(std::move(array), out_shape);
    repeat *= out_shape[e];
  }
  return std::make_unique<RepeatReader>(std::move(array), repeat);
}

std::unique_ptr<OperandReader> make_memory_reader(const void* data, DType dtype,
                                                  const std::vector<int64_t>& shape,
                                                  const std::vector<int64_t>& out_shape) {
  if (broadcast_shapes(shape, out_shape) != out_shape) {
    throw ValueError("an operand of shape " + shape_str(shape) + " does not broadcast to " +
                     shape_str(out_shape));
  }
  return std::make_unique<ResidentReader>(std::vector<std::byte>{},
                                          static_cast<const std::byte*>(data), itemsize(dtype),
                                          shape, out_shape);
}

}  // namespace jask
