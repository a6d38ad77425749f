// Engine errors. Each maps to one Python exception at the binding layer, so
// messages must name the paths, shapes, dtypes and sizes involved.
#pragma once
#include <stdexcept>
#include <string>
#include <string_view>

namespace jask {

// -> ValueError: bad shapes, sizes, malformed headers, too-small budgets.
struct ValueError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// -> TypeError: dtype mismatches and unsupported dtypes.
struct TypeError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// -> FileNotFoundError.
struct NotFoundError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// -> PermissionError: writing an array opened read-only.
struct ReadOnlyError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// -> OSError: the operating system refused an I/O call.
struct IoError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// -> NotImplementedError: a feature this build or this version lacks (a codec).
struct NotImplementedError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// -> MemoryError: the memory budget cannot hold the smallest unit of work.
struct MemoryError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// -> IsADirectoryError: a directory where a file was expected.
struct DirectoryError : IoError {
  using IoError::IoError;
};

// -> BlockingIOError: another process has the file open for writing.
struct LockedError : IoError {
  using IoError::IoError;
};

// "open(/x/y.npy): No such file or directory" style message from errno.
std::string errno_message(const std::string& what, const std::string& path, int err);

// Test hook: SIGKILLs this process when JASK_TEST_CRASH_AT names `point`, so a
// test can stop an update at an exact step (tests/test_update_crash.py).
void crash_if(std::string_view point);

}  // namespace jask
