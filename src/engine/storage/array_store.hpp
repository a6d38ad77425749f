// Arrays on disk and the handle registry. A handle is the int32 that stands
// for an array inside jitted programs; the registry maps it to the file.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/dtype.hpp"
#include "io/file.hpp"

namespace jask {

struct ArrayInfo {
  DType dtype;
  std::vector<int64_t> shape;

  int64_t numel() const;
  uint64_t nbytes() const { return static_cast<uint64_t>(numel()) * itemsize(dtype); }
  std::string describe() const;  // e.g. "float32[4,6]"
};

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
  static std::shared_ptr<StoredArray> open_npy(const std::string& path, bool writable);
  static std::shared_ptr<StoredArray> open_raw(const std::string& path, const ArrayInfo& info,
                                               uint64_t offset, bool writable);
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
  const std::string& path() const { return file_->path; }
  uint64_t data_offset() const { return data_offset_; }
  bool writable() const { return file_->current()->writable(); }
  bool is_scratch() const { return file_->scratch; }
  // The file now behind the array. replace_data() may install another; this
  // one stays readable (its inode alive) while the pointer is held.
  std::shared_ptr<const File> file() const { return file_->current(); }

  // Element ranges in C order.
  void read_elems(void* dst, int64_t first, int64_t count) const;
  void write_elems(const void* src, int64_t first, int64_t count) const;

  // Replaces the array's contents as one step that a crash cannot tear: a
  // new file is built beside the old one (see ReplacementFile), holding the
  // old file's bytes outside the data (a .npy header, a raw file's prefix and
  // suffix) and the data `write_data` writes into `staged`, an array of the
  // same layout over the new file. It is then renamed over the path and
  // installed for this array and every view of its file. Readers in flight
  // finish the read they started on the old file.
  // Cost: disk space for a second copy of the file until the rename, the
  // bytes outside the data read and written once more, an fdatasync of the
  // new file and an fsync of its directory (both skipped for scratch files).
  using DataWriter = std::function<void(const StoredArray& staged)>;
  void replace_data(const DataWriter& write_data);

 private:
  // Shared by reshaped views; a scratch file is unlinked with its last view.
  class OwnedFile {
   public:
    OwnedFile(std::shared_ptr<File> f, bool s);
    ~OwnedFile();
    // Copied per read or write, under a lock: install() may swap the
    // pointer from another thread at any time.
    std::shared_ptr<const File> current() const;
    void install(std::shared_ptr<File> f);

    const std::string path;  // unchanged by install(): the new file was renamed onto it
    const bool scratch;
    // Held for a whole replace_data, so renames and installs happen in the
    // same order when two threads update one array.
    std::mutex replacing;

   private:
    mutable std::mutex mu_;
    std::shared_ptr<File> file_;
  };
  static std::shared_ptr<StoredArray> create_npy(
      const std::string& path, const ArrayInfo& info, bool scratch,
      ScratchContents contents = ScratchContents::kZeros);
  StoredArray(std::unique_ptr<File> file, ArrayInfo info, uint64_t offset, bool scratch)
      : file_(std::make_shared<OwnedFile>(std::move(file), scratch)),
        info_(std::move(info)),
        data_offset_(offset) {}
  StoredArray(std::shared_ptr<OwnedFile> file, ArrayInfo info, uint64_t offset)
      : file_(std::move(file)), info_(std::move(info)), data_offset_(offset) {}
  std::shared_ptr<OwnedFile> file_;
  ArrayInfo info_;
  uint64_t data_offset_;
};

using ArrayRef = std::shared_ptr<StoredArray>;

// Handles are created "floating" (no owner). Python takes ownership with
// acquire(); compiled programs free intermediates with release_floating().
class Registry {
 public:
  static Registry& instance();
  int32_t add(ArrayRef array);
  ArrayRef get(int32_t handle) const;
  void acquire(int32_t handle);
  void release(int32_t handle);
  void release_floating(int32_t handle);
  size_t size() const;
  void clear();

 private:
  struct Entry {
    ArrayRef array;
    int owners = 0;
  };
  mutable std::mutex mu_;
  std::unordered_map<int32_t, Entry> entries_;
  int32_t next_ = 1;
};

}  // namespace jask
