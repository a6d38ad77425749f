// Recycled scratch files. Writing blocks a file already owns can be much
// faster than writing new ones: on this project's disk (ext4 mounted with
// discard, on a thin-provisioned virtual disk) freed blocks go back to the
// host, and direct writes into fresh blocks ran at 0.25-0.27 GB/s against
// 0.31-0.40 GB/s for overwriting (measured with 512 MiB of 4 MiB direct writes, 4 in flight; see
// log.md). Files of freed scratch arrays wait here for an op that overwrites every byte of its
// output (an elementwise pass, a matmul); ops that rely on a new file reading as zeros never get
// one.
#pragma once
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace jask {

class ScratchPool {
 public:
  static ScratchPool& instance();

  // A scratch array's file of `bytes` was created.
  void created(uint64_t bytes);
  // A scratch array's file is no longer used: it is kept, renamed beside
  // itself, if the pool then holds at most as many bytes as the live
  // scratch arrays and at most kMaxFiles files; otherwise it is unlinked.
  // When live bytes fall below pooled ones, the oldest pooled files are
  // unlinked: recycling never more than doubles scratch space.
  // `allocated` is how much of it is on disk (a file never written is sparse).
  void release(const std::string& path, uint64_t bytes, uint64_t allocated);
  // Renames a pooled file of between `bytes` and twice that to `path` and
  // returns true (the caller resizes it), or returns false. Of those, the
  // one with the most bytes already on disk wins (writing them is what is
  // faster), then the smallest.
  bool take(uint64_t bytes, const std::string& path);
  // Unlinks every pooled file (when scratch moves or shuts down).
  void clear();

  void set_enabled(bool enabled);
  bool enabled() const;

  struct Stats {
    uint64_t live_bytes = 0, pooled_bytes = 0, pooled_files = 0, reused_files = 0;
  };
  Stats stats() const;

  static constexpr size_t kMaxFiles = 64;

 private:
  ScratchPool() = default;
  struct Entry {
    std::string path;
    uint64_t bytes, allocated;
  };
  mutable std::mutex mu_;
  std::vector<Entry> pooled_;
  uint64_t live_bytes_ = 0, pooled_bytes_ = 0, reused_files_ = 0, counter_ = 0;
  bool enabled_ = true;
};

}  // namespace jask
