// Many scattered runs of one file read or written at once, with several
// requests in flight: random rows of a table (a gather's rows, a sparse
// optimizer's touched rows) are latency-bound one request at a time, and a
// disk serves many small requests in parallel at close to the rate it serves
// one large one.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>

#include "io/file.hpp"

namespace jask {

// Bytes [offset, offset + bytes) of a file and the memory they are read into.
struct ReadRun {
  uint64_t offset = 0;
  size_t bytes = 0;
  std::byte* dst = nullptr;
};

// Bytes [offset, offset + bytes) of a file and the memory they are written from.
struct WriteRun {
  uint64_t offset = 0;
  size_t bytes = 0;
  const std::byte* src = nullptr;
};

// Requests in flight by default: past ~32 a virtual or NVMe disk serves no
// more small requests per second, and each one costs a thread here.
inline constexpr int kRunsInFlight = 32;

// Reads every run of `file` into its memory, at most `in_flight` requests at a
// time (threads of this call, each taking the next request in file order).
// Runs may come in any order; runs that follow each other both in the file
// and in memory become one request. Each request is File::read_at with `io`:
// its aligned middle goes O_DIRECT when the memory it lands in has the file
// offset's alignment (mod 4096), the rest through the page cache. Runs may
// overlap in the file but not in memory. Every request in flight ends before
// the first error (IoError naming the file and the offset) is rethrown.
void read_runs(const File& file, std::span<const ReadRun> runs, const IoPolicy& io,
               int in_flight = kRunsInFlight);

// Writes every run to `file` the same way (File::write_at per request). Runs
// must not overlap in the file (ValueError naming the two runs): the order in
// which requests land is not defined. A run of zero bytes is skipped.
void write_runs(const File& file, std::span<const WriteRun> runs, const IoPolicy& io,
                int in_flight = kRunsInFlight);

}  // namespace jask
