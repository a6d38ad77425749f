// The engine's one I/O configuration: whether O_DIRECT is used and how large
// reads reach the disk (set from Python with set_io_mode), with kAuto's
// measurement and the byte counters. io/ keeps no process-wide state; the
// storage layer hands io_policy() to every read and write it makes.
#pragma once
#include "io/file.hpp"

namespace jask {

// What a read or write issued now follows (a snapshot: two atomic loads).
IoPolicy io_policy();
// The same for a file's header (format detection, a .npy header).
IoPolicy header_io_policy();

// O_DIRECT on or off for every later request (tests exercise the buffered
// fallback with it).
void set_direct_io_enabled(bool enabled);
bool direct_io_enabled();

// Restarts kAuto's measurement when `mode` is kAuto.
void set_read_mode(ReadMode mode);
// kAuto until kAuto has measured both ways.
ReadMode read_mode();

IoCounters& io_counters();

}  // namespace jask
