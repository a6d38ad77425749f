#include "kernels/write_rows.hpp"

#include <algorithm>
#include <functional>
#include <mutex>
#include <string>

#include "base/errors.hpp"
#include "call/registry.hpp"
#include "storage/io_config.hpp"
#include "storage/journal.hpp"
#include "storage/transaction.hpp"

namespace jask {
namespace {

void check_arrays(const std::vector<ArrayRef>& arrays, const std::vector<int64_t>& rows,
                  const std::vector<uint64_t>& value_bytes) {
  if (arrays.empty()) throw ValueError("write_rows: no arrays to write");
  const ArrayInfo& first = arrays[0]->info();
  if (first.shape.empty()) throw ValueError("write_rows: " + first.describe() + " has no rows");
  const int64_t n = first.shape[0];
  int lasting = 0;
  for (size_t k = 0; k < arrays.size(); ++k) {
    const StoredArray& a = *arrays[k];
    const ArrayInfo& info = a.info();
    if (info.shape.empty() || info.shape[0] != n) {
      throw ValueError("write_rows: " + info.describe() + " (" + a.path() +
                       ") does not have the leading length " + std::to_string(n) + " of " +
                       first.describe());
    }
    if (!a.writable() || a.chunked() != nullptr) {
      throw ReadOnlyError("cannot write rows of " + a.path() +
                          ": it was opened read-only (open it with mode=\"r+\")");
    }
    const uint64_t row_bytes =
        static_cast<uint64_t>(info.numel() / std::max<int64_t>(n, 1)) * itemsize(info.dtype);
    if (value_bytes[k] < row_bytes * rows.size()) {
      throw ValueError("write_rows: " + std::to_string(value_bytes[k]) + " bytes of new rows for " +
                       std::to_string(rows.size()) + " rows of " + info.describe());
    }
    for (size_t j = 0; j < k; ++j) {
      if (arrays[j]->shared_file() == a.shared_file()) {
        throw ValueError("write_rows: " + arrays[j]->path() + " and " + a.path() +
                         " are in one file; each array must have a file of its own");
      }
    }
    if (!a.is_scratch() && ++lasting > 1) {
      throw ValueError("write_rows: more than one of the arrays is a lasting file (" + a.path() +
                       " and another): a crash could leave them at different steps; keep all "
                       "but one in scratch (jask.row_sparse's init does)");
    }
  }
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i] < 0 || rows[i] >= n || (i > 0 && rows[i] <= rows[i - 1])) {
      throw ValueError("write_rows: row " + std::to_string(rows[i]) + " at position " +
                       std::to_string(i) + " is out of [0, " + std::to_string(n) +
                       ") or not above the one before (rows must ascend)");
    }
  }
}

// The byte runs of `a`'s file that hold `rows`, one per run of adjacent rows.
std::vector<ByteRun> runs_of(const StoredArray& a, const std::vector<int64_t>& rows) {
  const ArrayInfo& info = a.info();
  const int64_t row_elems = info.numel() / info.shape[0];
  const size_t item = itemsize(info.dtype);
  std::vector<ByteRun> runs;
  for (size_t i = 0; i < rows.size();) {
    size_t j = i + 1;
    while (j < rows.size() && rows[j] == rows[j - 1] + 1) ++j;
    a.layout().for_each_extent(
        rows[i] * row_elems, static_cast<int64_t>(j - i) * row_elems, item,
        [&](uint64_t offset, size_t bytes, size_t) {
          if (!runs.empty() && runs.back().offset + runs.back().length == offset)
            runs.back().length += bytes;
          else
            runs.push_back(ByteRun{offset, bytes});
        });
    i = j;
  }
  return runs;
}

// Runs `write` with the readers of files[from..] held back, in address order
// (the order ReadPins pins them in, so no reader waits on us while we wait
// on it).
void with_all_readers_held(const std::vector<SharedFile*>& files, size_t from,
                           const std::function<void()>& write) {
  if (from == files.size()) return write();
  files[from]->with_readers_held([&] { with_all_readers_held(files, from + 1, write); });
}

}  // namespace

void write_rows(const std::vector<ArrayRef>& arrays, const std::vector<int64_t>& rows,
                const std::vector<const void*>& values, const std::vector<uint64_t>& value_bytes) {
  check_arrays(arrays, rows, value_bytes);
  if (rows.empty()) return;
  std::vector<SharedFile*> files;
  for (const ArrayRef& a : arrays) files.push_back(a->shared_file().get());
  std::sort(files.begin(), files.end());
  // One update of a file at a time (as update_), in address order.
  std::vector<std::unique_lock<std::mutex>> updating;
  for (SharedFile* f : files) updating.emplace_back(f->replacing);

  std::vector<std::vector<ByteRun>> runs;
  std::vector<std::shared_ptr<const File>> targets;
  size_t journaled = arrays.size();  // the lasting array's position, if one is
  for (size_t k = 0; k < arrays.size(); ++k) {
    const StoredArray& a = *arrays[k];
    runs.push_back(runs_of(a, rows));
    if (!a.is_scratch()) {
      // A dead process's update of this file is finished (or undone) first.
      recover_transactions(a.shared_file()->path());
      recover_journal(a.shared_file()->path());
      journaled = k;
    }
    targets.push_back(a.file());
    if (!targets.back()->writable())
      throw ReadOnlyError("cannot write rows of " + a.path() + ": it was opened read-only");
  }
  // Everything checked: past the journal's commit point the step happens.
  const IoPolicy io = io_policy();
  std::unique_ptr<JournalWriter> journal;
  if (journaled < arrays.size()) {
    const StoredArray& a = *arrays[journaled];
    journal = std::make_unique<JournalWriter>(a.shared_file()->path(), *targets[journaled],
                                              runs[journaled]);
    uint64_t payload = 0;
    for (const ByteRun& r : runs[journaled]) payload += r.length;
    journal->file()->write_at(values[journaled], static_cast<size_t>(payload),
                              journal->payload_offset(), io);
    journal->wrote(values[journaled], static_cast<size_t>(payload), journal->payload_offset());
    journal->commit();
  }
  try {
    with_all_readers_held(files, 0, [&] {
      for (size_t k = 0; k < arrays.size(); ++k) {
        const auto* data = static_cast<const std::byte*>(values[k]);
        if (k == journaled)
          journal->write_in_place(*targets[k], data);
        else
          write_runs(*targets[k], data, runs[k], io);
      }
    });
    if (journal) journal->finish(*targets[journaled]);
  } catch (const IoError& e) {
    if (!journal) throw;
    throw IoError("writing rows of " + arrays[journaled]->path() + " in place failed (" + e.what() +
                  "); the new rows are kept in " + journal->path() +
                  ", which the next open or update_ of the file writes in");
  }
}

namespace {

// write_rows: operands the arrays (handles), then in memory the rows
// (index_itemsize bytes each: ascending, distinct, then -1 for unused slots)
// and each array's new rows, one slot per row. The result: the same arrays,
// as new handles.
struct WriteRowsParams {
  int64_t index_itemsize = 0;
};
const Schema<WriteRowsParams> kWriteRowsSchema{
    field("index_itemsize", &WriteRowsParams::index_itemsize)};

std::vector<int64_t> used_rows(const MemoryOperand& idx, int64_t itemsize) {
  if ((itemsize != 4 && itemsize != 8) || idx.nbytes % static_cast<uint64_t>(itemsize) != 0)
    throw ValueError("write_rows: the rows must be int32 or int64, got " +
                     std::to_string(idx.nbytes) + " bytes of " + std::to_string(itemsize));
  const size_t n_slots = static_cast<size_t>(idx.nbytes / static_cast<uint64_t>(itemsize));
  auto slot = [&](size_t i) -> int64_t {
    return itemsize == 4 ? static_cast<const int32_t*>(idx.data)[i]
                         : static_cast<const int64_t*>(idx.data)[i];
  };
  std::vector<int64_t> rows;
  size_t used = 0;
  while (used < n_slots && slot(used) != -1) rows.push_back(slot(used++));
  for (size_t i = used; i < n_slots; ++i) {
    if (slot(i) != -1)
      throw ValueError("write_rows: slot " + std::to_string(i) + " holds row " +
                       std::to_string(slot(i)) + " after an unused slot (-1)");
  }
  return rows;
}

std::vector<int32_t> run_write_rows(const KernelCall& call, const WriteRowsParams& p) {
  const auto& ops = call.operands;
  expect_operands(call, ops.handles.size(), 0, ops.handles.size() + 1);
  std::vector<ArrayRef> arrays;
  for (int32_t h : ops.handles) arrays.push_back(Registry::instance().get(h));
  const std::vector<int64_t> rows = used_rows(ops.memory[0], p.index_itemsize);
  std::vector<const void*> values;
  std::vector<uint64_t> value_bytes;
  for (size_t k = 0; k < arrays.size(); ++k) {
    values.push_back(ops.memory[k + 1].data);
    value_bytes.push_back(ops.memory[k + 1].nbytes);
  }
  write_rows(arrays, rows, values, value_bytes);
  std::vector<int32_t> out;
  for (const ArrayRef& a : arrays) out.push_back(Registry::instance().add(a));
  return out;
}
const KernelRegistration kWriteRows{"write_rows", kWriteRowsSchema, run_write_rows,
                                    OperandPins::kKernelHoldsReaders};

}  // namespace
}  // namespace jask
