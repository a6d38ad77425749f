#include "storage/scratch_pool.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "storage/scratch.hpp"

namespace jask {

// Recycled files stay in the folder they came from: when scratch moves or
// shuts down, they go.
ScratchPool& ScratchPool::instance() {
  static ScratchPool& pool = []() -> ScratchPool& {
    static ScratchPool p;
    Scratch::instance().on_folder_change([] { p.clear(); });
    return p;
  }();
  return pool;
}

void ScratchPool::created(uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  live_bytes_ += bytes;
}

void ScratchPool::release(const std::string& path, uint64_t bytes, uint64_t allocated) {
  std::vector<std::string> doomed;  // unlinked outside the lock: freeing a large file takes time
  {
    std::lock_guard<std::mutex> lock(mu_);
    live_bytes_ -= std::min(live_bytes_, bytes);
    const bool keep =
        enabled_ && bytes > 0 && pooled_.size() < kMaxFiles && pooled_bytes_ + bytes <= live_bytes_;
    std::string pooled =
        path.substr(0, path.rfind('/') + 1) + "recycled-" + std::to_string(counter_ + 1);
    if (keep && ::rename(path.c_str(), pooled.c_str()) == 0) {
      ++counter_;
      pooled_.push_back(Entry{std::move(pooled), bytes, allocated});
      pooled_bytes_ += bytes;
    } else {
      doomed.push_back(path);  // gone already (its folder removed at exit) is fine
    }
    // Fewer live bytes than pooled ones: the oldest pooled files go.
    while (pooled_bytes_ > live_bytes_) {
      pooled_bytes_ -= pooled_.front().bytes;
      doomed.push_back(std::move(pooled_.front().path));
      pooled_.erase(pooled_.begin());
    }
  }
  for (const std::string& p : doomed) ::unlink(p.c_str());
}

bool ScratchPool::take(uint64_t bytes, const std::string& path) {
  std::lock_guard<std::mutex> lock(mu_);
  // A training step's outputs find the files of the previous step's, byte
  // for byte; an optimizer's zero-initialized state (never written, sparse)
  // is worth less than a written file of the same size.
  auto better = [&](const Entry& a, const Entry& b) {
    const uint64_t ua = std::min(a.allocated, bytes), ub = std::min(b.allocated, bytes);
    return ua != ub ? ua > ub : a.bytes < b.bytes;
  };
  size_t best = pooled_.size();
  for (size_t i = 0; i < pooled_.size(); ++i) {
    const Entry& e = pooled_[i];
    if (e.bytes < bytes || e.bytes > 2 * bytes) continue;
    if (best == pooled_.size() || better(e, pooled_[best])) best = i;
  }
  if (best == pooled_.size()) return false;
  Entry entry = std::move(pooled_[best]);
  pooled_.erase(pooled_.begin() + static_cast<std::ptrdiff_t>(best));
  pooled_bytes_ -= entry.bytes;
  if (::rename(entry.path.c_str(), path.c_str()) != 0) {
    ::unlink(entry.path.c_str());
    return false;
  }
  ++reused_files_;
  return true;
}

void ScratchPool::clear() {
  std::lock_guard<std::mutex> lock(mu_);
  for (const Entry& e : pooled_) ::unlink(e.path.c_str());
  pooled_.clear();
  pooled_bytes_ = 0;
}

void ScratchPool::set_enabled(bool enabled) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    enabled_ = enabled;
  }
  if (!enabled) clear();
}

bool ScratchPool::enabled() const {
  std::lock_guard<std::mutex> lock(mu_);
  return enabled_;
}

ScratchPool::Stats ScratchPool::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return Stats{live_bytes_, pooled_bytes_, pooled_.size(), reused_files_};
}

}  // namespace jask
