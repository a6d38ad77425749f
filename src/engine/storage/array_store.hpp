// Arrays on disk and the handle registry. A handle is the int32 that stands
// for an array inside jitted programs; the registry maps it to the file.
#pragma once
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/array_info.hpp"
#include "base/dtype.hpp"
#include "formats/format.hpp"
#include "io/file.hpp"
#include "storage/file_table.hpp"

namespace jask {

class ChunkedSource;
struct ChunkTable;

// What the op creating a scratch array will put in it. kZeros: it relies on
// bytes it does not write reading as zero (a new file). kOverwritten: it
// writes every data byte before the array is read, so the file of a freed
// scratch array may be recycled (see scratch_pool.hpp).
enum class ScratchContents { kZeros, kOverwritten };

class StoredArray {
 public:
  // A new private .npy file in this process's scratch folder, deleted (or
  // recycled) with the object.
  static std::shared_ptr<StoredArray> create_scratch(
      const ArrayInfo& info, const std::string& tag,
      ScratchContents contents = ScratchContents::kZeros);
  // A new .npy file at a user-chosen path (kept).
  static std::shared_ptr<StoredArray> create_file(const std::string& path, const ArrayInfo& info);
  // The array in the file at `path`, in place, read by the format plug-in
  // called `format` ("npy", "raw"; see formats/registry.hpp), or by the one
  // that recognises the file when `format` is empty. Arrays of one file
  // share its open (storage/file_table.hpp).
  static std::shared_ptr<StoredArray> open(const std::string& path, std::string_view format,
                                           const OpenOptions& options);
  // A read-only array whose elements live in encoded chunks (Zarr, HDF5
  // chunked, .npz deflated; see storage/chunked.hpp). table.path is opened
  // read-only through the file table like any array's file.
  static std::shared_ptr<StoredArray> open_chunked(ChunkTable table);
  // The same file seen with another shape of equal size (no copy).
  static std::shared_ptr<StoredArray> reshaped(const std::shared_ptr<StoredArray>& base,
                                               const std::vector<int64_t>& shape);
  // Elements [first, first + numel(shape)) of `base` in C order, seen as an
  // array of `shape` (no copy): a contiguous slice such as x[i:j]. Its data
  // offset is generally not 4096-aligned; readers shift their buffers to
  // match (OperandReader::alignment_shift), so O_DIRECT still applies.
  static std::shared_ptr<StoredArray> viewed(const std::shared_ptr<StoredArray>& base,
                                             int64_t first, const std::vector<int64_t>& shape);
  StoredArray(const StoredArray&) = delete;
  StoredArray& operator=(const StoredArray&) = delete;

  const ArrayInfo& info() const { return info_; }
  // As the array was opened (a symlink stays a symlink).
  const std::string& path() const { return path_; }
  const Layout& layout() const { return layout_; }
  uint64_t data_offset() const { return layout_.data_offset(); }
  // The file offset of element `element`: where a read of it starts, so
  // readers can land it in memory at the same alignment (for O_DIRECT).
  uint64_t byte_of(int64_t element) const {
    return layout_.byte_of(element, itemsize(info_.dtype));
  }
  bool writable() const { return writable_ && file_->current()->writable(); }
  bool is_scratch() const { return file_->scratch(); }
  // The file now behind the array. replace_data() may install another; this
  // one stays readable (its inode alive) while the pointer is held.
  std::shared_ptr<const File> file() const { return file_->current(); }

  // The chunks behind the array, or null (a contiguous file).
  const std::shared_ptr<const ChunkedSource>& chunked() const { return chunked_; }

  // Element ranges in C order.
  // With `bounce`, each extent is read through File::read_at_through.
  void read_elems(void* dst, int64_t first, int64_t count, AlignedBuffer* bounce = nullptr) const;
  // read_elems through File::read_in_place: dst has the range's file offset's
  // alignment (mod 4096, see Layout::byte_of) and the caller owns the pages
  // around [dst, dst + count elements), which receive the file's bytes.
  void read_elems_in_place(void* dst, int64_t first, int64_t count) const;
  void write_elems(const void* src, int64_t first, int64_t count) const;

  // Replaces the array's contents as one step that a crash cannot tear, with
  // the data `write_data` writes into `staged`, an array of the same shape
  // over a file of its own. Updates of arrays of one file run one at a time.
  // Two ways, chosen by what else the file holds:
  // - Up to in_place_update_threshold() bytes outside the array's data (a
  //   .npy, a raw file of one array; every scratch file): a new file is built
  //   beside the old one (see ReplacementFile), holding the old file's bytes
  //   outside the data (a header, a raw prefix and suffix, the other arrays
  //   as they are now) and the staged data. It is renamed over the path and
  //   installed for every array and view of the file; readers in flight
  //   finish the read they started on the old file. Cost: disk space for a
  //   second copy of the file until the rename, the bytes outside the data
  //   read and written once more, an fdatasync of the new file and an fsync
  //   of its directory (both skipped for scratch files).
  // - More (a container file of many arrays): staged into a journal beside
  //   the file, then written in place over the array's bytes while this
  //   process's readers of the file are held back (storage/journal.hpp).
  //   Cost: the array's bytes written twice, two fdatasyncs and two folder
  //   fsyncs, whatever the file's size. Other processes reading the file see
  //   the new bytes arrive (no pins across processes).
  using DataWriter = std::function<void(const StoredArray& staged)>;
  void replace_data(const DataWriter& write_data);
  // replace_data's first half, for callers that commit several arrays as one
  // step (storage/transaction.hpp): the new file, built but neither flushed
  // nor renamed; `temp_suffix` names it (see ReplacementFile). Only while
  // holding shared_file()->replacing.
  std::unique_ptr<ReplacementFile> stage_data(const DataWriter& write_data,
                                              const std::string& temp_suffix = "") const;
  // The entry of the file, shared by every array and view of it.
  const std::shared_ptr<SharedFile>& shared_file() const { return file_; }

 private:
  // The element range's pieces through read(file, bytes, offset, offset in the
  // range) (a chunked array through its decoder): read_elems's and
  // read_elems_in_place's one loop.
  template <class ReadExtent>
  void read_extents(void* dst, int64_t first, int64_t count, ReadExtent read) const;
  // Whether replace_data() writes in place (above).
  bool updates_in_place() const;
  void update_in_place(const DataWriter& write_data);

  StoredArray(std::shared_ptr<SharedFile> file, std::string path, ArrayInfo info, Layout layout,
              bool writable)
      : file_(std::move(file)),
        path_(std::move(path)),
        info_(std::move(info)),
        layout_(layout),
        writable_(writable) {}
  std::shared_ptr<SharedFile> file_;
  std::string path_;
  ArrayInfo info_;
  Layout layout_;
  bool writable_;
  // Chunked arrays: the source, and where element 0 lies in its C order (a view).
  std::shared_ptr<const ChunkedSource> chunked_;
  int64_t chunk_base_ = 0;
  // A staged array's writes, reported (data, bytes, file offset) after each
  // is made: the journal checksums them while they are in memory.
  std::function<void(const void*, size_t, uint64_t)> on_write_;
};

using ArrayRef = std::shared_ptr<StoredArray>;

// The files of `arrays` (registry handles), pinned for one engine call (see
// ReadPins); unknown handles are skipped (the call itself reports them).
std::vector<std::shared_ptr<SharedFile>> files_of(const std::vector<ArrayRef>& arrays);
std::vector<std::shared_ptr<SharedFile>> files_of_handles(const std::vector<int32_t>& handles);

// Handles are created "floating" (no owner). Python takes ownership with
// acquire(); compiled programs free intermediates with release_floating().
class Registry {
 public:
  static Registry& instance();
  int32_t add(ArrayRef array);
  ArrayRef get(int32_t handle) const;
  // Null for an unknown handle.
  ArrayRef find(int32_t handle) const;
  void acquire(int32_t handle);
  void release(int32_t handle);
  void release_floating(int32_t handle);
  // A compiled program's call made `handle` in `run` (XLA's id of one
  // execution of a program). When a call of the run fails (a full disk), the
  // program's Release calls after it never run: fail_run frees the run's
  // floating handles, those made so far and any made after.
  void made_in_run(int32_t handle, int64_t run);
  void fail_run(int64_t run);
  size_t size() const;
  void clear();

 private:
  static constexpr int64_t kNoRun = -1;
  static constexpr size_t kFailedRunsKept = 16;
  struct Entry {
    ArrayRef array;
    int owners = 0;
    int64_t run = kNoRun;
  };
  mutable std::mutex mu_;
  std::unordered_map<int32_t, Entry> entries_;
  std::deque<int64_t> failed_runs_;  // the latest few
  int32_t next_ = 1;
};

}  // namespace jask
