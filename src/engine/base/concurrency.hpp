// Running a few calls at once on their own threads.
#pragma once
#include <cstddef>
#include <functional>

namespace jask {

// Calls fn(0) ... fn(n - 1) at the same time (one thread each, the last on
// the calling thread) and rethrows the first exception once all are done.
void run_concurrently(size_t n, const std::function<void(size_t)>& fn);

// memcpy of n bytes, cut between the cores where n is large: for a copy the
// caller waits for with nothing else to run, one thread leaves memory
// bandwidth unused.
void copy_on_all_cores(void* dst, const void* src, size_t n);

}  // namespace jask
