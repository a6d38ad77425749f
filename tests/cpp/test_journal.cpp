// update_ in place through a redo journal (storage/journal.hpp): the
// checksum, the header, recovery (replay, discard, idempotence), crashes at
// each step, and readers during the in-place write.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "base/errors.hpp"
#include "kernels/ops.hpp"
#include "storage/file_table.hpp"
#include "storage/journal.hpp"
#include "test_util.hpp"

namespace jask {
namespace {

namespace fs = std::filesystem;
using test::BudgetGuard;
using test::ScratchDir;
using test::TempDir;

// A raw container: three float32 arrays of kNumel elements back to back
// after a prefix, with bytes between and after them, like a safetensors shard.
const int64_t kNumel = 3001;  // 12004 bytes: not a multiple of 4096
const ArrayInfo kInfo{DType::f32, {kNumel}};
const uint64_t kPrefix = 1000, kGap = 123;
uint64_t offset_of(int i) { return kPrefix + static_cast<uint64_t>(i) * (kInfo.nbytes() + kGap); }
const uint64_t kFileBytes = offset_of(3) + 77;

std::vector<char> container_bytes() {
  std::vector<char> bytes(kFileBytes);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 7 % 251);
  return bytes;
}

// Sets the in-place threshold for one test.
class ThresholdGuard {
 public:
  explicit ThresholdGuard(uint64_t bytes) : saved_(in_place_update_threshold()) {
    set_in_place_update_threshold(bytes);
  }
  ~ThresholdGuard() { set_in_place_update_threshold(saved_); }
  ThresholdGuard(const ThresholdGuard&) = delete;
  ThresholdGuard& operator=(const ThresholdGuard&) = delete;

 private:
  uint64_t saved_;
};

uint64_t inode_of(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return static_cast<uint64_t>(st.st_ino);
}

bool exists(const std::string& path) {
  std::error_code ec;
  return fs::exists(path, ec);
}

// `bytes` with [offset, offset + payload.size()) replaced by `payload`.
std::vector<char> with_extent(std::vector<char> bytes, uint64_t offset,
                              const std::vector<char>& payload) {
  std::copy(payload.begin(), payload.end(), bytes.begin() + static_cast<int64_t>(offset));
  return bytes;
}

std::vector<char> payload_bytes(int salt) {
  std::vector<char> p(kInfo.nbytes());
  for (size_t i = 0; i < p.size(); ++i) p[i] = static_cast<char>((i * 13 + salt) % 256);
  return p;
}

// A journal for array `i` of the container holding `payload`, committed
// (the commit point passed) and then abandoned, as a writer killed before
// writing in place leaves it.
void leave_committed_journal(const std::string& path, int i, const std::vector<char>& payload) {
  File file(path, OpenMode::kReadWrite);
  JournalWriter journal(path, file, offset_of(i), payload.size());
  AlignedBuffer buf(payload.size());
  std::memcpy(buf.data(), payload.data(), payload.size());
  // Two pieces, the second written first: the checksum combines them.
  const size_t half = payload.size() / 2;
  const uint64_t at = journal.payload_offset();
  journal.file()->write_at(buf.data() + half, payload.size() - half, at + half, io_policy());
  journal.wrote(buf.data() + half, payload.size() - half, at + half);
  journal.file()->write_at(buf.data(), half, at, io_policy());
  journal.wrote(buf.data(), half, at);
  journal.commit();
}

TEST(Journal, Crc32cIsTheCastagnoliChecksumAndCombines) {
  const std::string check = "123456789";
  EXPECT_EQ(crc32c(0, check.data(), check.size()), 0xE3069283u);
  EXPECT_EQ(crc32c(0, nullptr, 0), 0u);
  std::vector<char> data(100000);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 31 % 257);
  const uint32_t whole = crc32c(0, data.data(), data.size());
  for (size_t split : {size_t{0}, size_t{1}, size_t{4095}, size_t{4096}, size_t{77777}}) {
    const uint32_t a = crc32c(0, data.data(), split);
    const uint32_t b = crc32c(0, data.data() + split, data.size() - split);
    EXPECT_EQ(crc32c(a, data.data() + split, data.size() - split), whole) << split;
    EXPECT_EQ(crc32c_combine(a, b, data.size() - split), whole) << split;
  }
}

TEST(Journal, HeaderRoundTripsAndAnyChangedByteOrShortHeaderIsRejected) {
  JournalHeader h;
  h.file = FileIdentity{0x1234, 0xabcdef0123ULL};
  h.file_size = uint64_t{10} << 30;
  h.runs = {ByteRun{(uint64_t{3} << 30) + 17, uint64_t{64} << 20}};
  h.payload_offset = JournalHeader::payload_offset_for(h.runs[0].offset);
  h.payload_crc = 0xdeadbeef;
  const std::string bytes = h.encode();
  ASSERT_EQ(bytes.size(), JournalHeader::kHeaderBytes);
  const std::optional<JournalHeader> back = JournalHeader::decode(bytes);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->file, h.file);
  EXPECT_EQ(back->file_size, h.file_size);
  ASSERT_EQ(back->runs.size(), 1u);
  EXPECT_EQ(back->runs[0].offset, h.runs[0].offset);
  EXPECT_EQ(back->runs[0].length, h.runs[0].length);
  EXPECT_EQ(back->payload_offset, 4096u + 17u);
  EXPECT_EQ(back->payload_crc, h.payload_crc);
  for (size_t i = 0; i < 72; ++i) {  // the magic, the fields and their checksum
    std::string changed = bytes;
    changed[i] = static_cast<char>(changed[i] ^ 0x40);
    EXPECT_FALSE(JournalHeader::decode(changed).has_value()) << "byte " << i;
  }
  EXPECT_FALSE(JournalHeader::decode(bytes.substr(0, 4095)).has_value());
  EXPECT_FALSE(JournalHeader::decode(std::string(4096, '\0')).has_value());
  JournalHeader beyond = h;
  beyond.runs[0].length = h.file_size - h.runs[0].offset + 1;  // an extent past the file's end
  EXPECT_FALSE(JournalHeader::decode(beyond.encode()).has_value());
}

TEST(Journal, ACommittedJournalIsReplayedOverItsExtentOnlyAndReplayingTwiceIsHarmless) {
  BudgetGuard budget(4096);  // the replay copies in several blocks
  TempDir dir;
  const std::string path = dir.file("shard.bin");
  const std::vector<char> before = container_bytes();
  test::write_file_bytes(path, before);
  const std::vector<char> payload = payload_bytes(5);
  leave_committed_journal(path, 1, payload);
  const std::string journal = path + ".jask-journal";
  ASSERT_TRUE(exists(journal));
  EXPECT_FALSE(exists(journal + ".part"));
  EXPECT_EQ(test::read_file_bytes(path), before);  // committed, not yet written in place
  const std::vector<char> saved = test::read_file_bytes(journal);

  const std::vector<char> after = with_extent(before, offset_of(1), payload);
  recover_journal(path);
  EXPECT_EQ(test::read_file_bytes(path), after);
  EXPECT_FALSE(exists(journal));
  // A crash during the replay leaves the journal: it is replayed again.
  test::write_file_bytes(journal, saved);
  recover_journal(path);
  EXPECT_EQ(test::read_file_bytes(path), after);
  EXPECT_FALSE(exists(journal));
  // A read-only open writes nothing: it reads the payload over the extent.
  test::write_file_bytes(journal, saved);
  std::fstream(path, std::ios::in | std::ios::out | std::ios::binary)
      .write(before.data(), static_cast<std::streamsize>(before.size()));
  RecoveryNotes notes;
  ArrayRef ro = test::open_raw(path, kInfo, offset_of(1), /*writable=*/false);
  EXPECT_EQ(test::read_file_bytes(path), before);
  EXPECT_EQ(test::read_file_bytes(journal), saved);
  std::vector<char> read(kInfo.nbytes());
  ro->read_elems(read.data(), 0, kInfo.numel());
  EXPECT_EQ(read, payload);
  for (int64_t first : {int64_t{0}, int64_t{1}, int64_t{999}}) {  // reads that start in it
    std::vector<char> part(16);
    ro->read_elems(part.data(), first, 4);
    EXPECT_EQ(part,
              std::vector<char>(payload.begin() + first * 4, payload.begin() + first * 4 + 16));
  }
  const std::vector<std::string> said = notes.take();
  ASSERT_EQ(said.size(), 1u);
  EXPECT_NE(said[0].find(journal), std::string::npos) << said[0];
  EXPECT_NE(said[0].find("mode=\"r+\""), std::string::npos) << said[0];
  // The neighbours read the file's own bytes.
  ArrayRef next = test::open_raw(path, kInfo, offset_of(2), /*writable=*/false);
  std::vector<char> own(kInfo.nbytes());
  next->read_elems(own.data(), 0, kInfo.numel());
  const auto own_at = before.begin() + static_cast<long>(offset_of(2));
  EXPECT_EQ(own, std::vector<char>(own_at, own_at + static_cast<long>(kInfo.nbytes())));
  // A writable open replays it.
  ArrayRef rw = test::open_raw(path, kInfo, offset_of(1), /*writable=*/true);
  EXPECT_EQ(test::read_file_bytes(path), after);
  EXPECT_FALSE(exists(journal));
}

TEST(Journal, ACorruptJournalOrOneNamingAnotherFileIsLeftAloneAndTheFileUntouched) {
  TempDir dir;
  const std::string path = dir.file("shard.bin");
  const std::string journal = path + ".jask-journal";
  const std::vector<char> before = container_bytes();
  test::write_file_bytes(path, before);
  leave_committed_journal(path, 2, payload_bytes(9));
  const std::vector<char> good = test::read_file_bytes(journal);

  std::vector<char> bad_payload = good;
  bad_payload[JournalHeader::payload_offset_for(offset_of(2)) + 100] ^= 1;
  std::vector<char> bad_header = good;
  bad_header[20] ^= 1;
  std::vector<char> short_payload(good.begin(), good.end() - 1);
  RecoveryNotes notes;
  for (const auto& corrupt : {bad_payload, bad_header, short_payload}) {
    test::write_file_bytes(journal, corrupt);
    recover_journal(path);
    EXPECT_EQ(test::read_file_bytes(path), before);
    EXPECT_EQ(test::read_file_bytes(journal), corrupt);
    ArrayRef ro = test::open_raw(path, kInfo, offset_of(2), /*writable=*/false);
    std::vector<char> read(kInfo.nbytes());
    ro->read_elems(read.data(), 0, kInfo.numel());
    const auto at = before.begin() + static_cast<long>(offset_of(2));
    EXPECT_EQ(read, std::vector<char>(at, at + static_cast<long>(kInfo.nbytes())));
  }
  // The path now names another file (a new inode): the journal is not its.
  fs::copy_file(path, dir.file("copy.bin"));
  fs::rename(dir.file("copy.bin"), path);
  test::write_file_bytes(journal, good);
  recover_journal(path);
  EXPECT_EQ(test::read_file_bytes(path), before);
  EXPECT_TRUE(exists(journal));
  const std::vector<std::string> said = notes.take();
  ASSERT_FALSE(said.empty());
  EXPECT_NE(said[0].find(journal + " is not an intact journal"), std::string::npos) << said[0];
}

TEST(Journal, AFifoOrSymlinkUnderAJournalsNameNeitherBlocksNorIsActedOn) {
  TempDir dir;
  const std::string path = dir.file("shard.bin");
  const std::vector<char> before = container_bytes();
  test::write_file_bytes(path, before);
  leave_committed_journal(path, 1, payload_bytes(3));
  const std::string journal = path + ".jask-journal";
  fs::rename(journal, dir.file("elsewhere"));
  RecoveryNotes notes;
  for (int kind = 0; kind < 2; ++kind) {
    if (kind == 0) {
      ASSERT_EQ(::mkfifo(journal.c_str(), 0600), 0);
      ASSERT_EQ(::mkfifo((journal + ".part").c_str(), 0600), 0);
    } else {
      fs::create_symlink(dir.file("elsewhere"), journal);
      fs::create_symlink(dir.file("elsewhere"), journal + ".part");
    }
    recover_journal(path);
    ArrayRef ro = test::open_raw(path, kInfo, offset_of(1), /*writable=*/false);
    EXPECT_EQ(test::read_file_bytes(path), before);
    EXPECT_TRUE(fs::symlink_status(journal).type() != fs::file_type::not_found);
    EXPECT_TRUE(fs::symlink_status(journal + ".part").type() != fs::file_type::not_found);
    fs::remove(journal);
    fs::remove(journal + ".part");
  }
  EXPECT_GE(notes.take().size(), 4u);
}

TEST(Journal, ADeadWritersPartIsRemovedAndALiveWritersPartKept) {
  TempDir dir;
  const std::string path = dir.file("shard.bin");
  test::write_file_bytes(path, container_bytes());
  const std::string part = path + ".jask-journal.part";
  test::write_file_bytes(part, std::vector<char>(5000, 'x'));
  {
    File holder(part, OpenMode::kReadOnly);
    ASSERT_TRUE(holder.try_lock_exclusive());
    recover_journal(path);
    EXPECT_TRUE(exists(part));
    EXPECT_EQ(test::read_file_bytes(path), container_bytes());
  }
  recover_journal(path);  // the holder's lock went with it
  EXPECT_FALSE(exists(part));
  EXPECT_EQ(test::read_file_bytes(path), container_bytes());
}

// The three arrays of a container at `path`, opened writable and registered.
std::vector<int32_t> open_container(const std::string& path) {
  std::vector<int32_t> handles;
  for (int i = 0; i < 3; ++i)
    handles.push_back(
        Registry::instance().add(test::open_raw(path, kInfo, offset_of(i), /*writable=*/true)));
  return handles;
}

std::vector<char> encoded(const std::vector<double>& values) {
  std::vector<unsigned char> e = test::encode(DType::f32, values);
  return std::vector<char>(e.begin(), e.end());
}

TEST(Journal, UpdateInPlaceWritesOnlyTheArraysBytesAndKeepsTheInode) {
  ScratchDir scratch;
  BudgetGuard budget(4096);
  ThresholdGuard threshold(0);
  TempDir dir;
  const std::string path = dir.file("shard.bin");
  const std::vector<char> before = container_bytes();
  test::write_file_bytes(path, before);
  const uint64_t inode = inode_of(path);
  const std::vector<int32_t> a = open_container(path);

  const std::vector<double> values = test::test_values(kNumel, 3);
  copy_into(a[1], test::make_array(DType::f32, kInfo.shape, values));
  EXPECT_EQ(test::read_file_bytes(path), with_extent(before, offset_of(1), encoded(values)));
  EXPECT_EQ(test::array_values(a[1]), values);
  EXPECT_EQ(inode_of(path), inode);
  EXPECT_FALSE(exists(path + ".jask-journal"));
  EXPECT_FALSE(exists(path + ".jask-journal.part"));
  // From another array of the same file, twice in a row.
  copy_into(a[0], a[1]);
  copy_into(a[2], a[1]);
  std::vector<char> expected = with_extent(before, offset_of(0), encoded(values));
  expected = with_extent(expected, offset_of(1), encoded(values));
  expected = with_extent(expected, offset_of(2), encoded(values));
  EXPECT_EQ(test::read_file_bytes(path), expected);
  EXPECT_EQ(inode_of(path), inode);
}

TEST(Journal, UnderTheThresholdUpdateStillRenamesANewFile) {
  ScratchDir scratch;
  ThresholdGuard threshold(kFileBytes);
  TempDir dir;
  const std::string path = dir.file("shard.bin");
  test::write_file_bytes(path, container_bytes());
  const uint64_t inode = inode_of(path);
  const std::vector<int32_t> a = open_container(path);
  copy_into(a[0], test::make_array(DType::f32, kInfo.shape, test::test_values(kNumel, 1)));
  EXPECT_NE(inode_of(path), inode);
}

// A child killed at `point` of an update in place of array 1 (budget 4096:
// several blocks), then the file as it left it.
void update_killed_at(const std::string& path, const char* point) {
  pid_t child = ::fork();
  if (child == 0) {
    ::setenv("JASK_TEST_CRASH_AT", point, 1);
    set_in_place_update_threshold(0);
    set_memory_budget(4096);
    try {
      const std::vector<int32_t> a = open_container(path);
      copy_into(a[1], test::make_array(DType::f32, kInfo.shape, test::test_values(kNumel, 8)));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "child at %s: %s\n", point, e.what());
      ::_exit(2);
    }
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << point << " " << status;
}

TEST(Journal, AKillAtEachStepLeavesTheArrayAllOldOrAllNewAndEveryOtherByteAsItWas) {
  const std::vector<char> before = container_bytes();
  const std::vector<char> after =
      with_extent(before, offset_of(1), encoded(test::test_values(kNumel, 8)));
  struct Case {
    const char* point;
    bool journal_left, is_new;
  };
  for (const Case& c :
       {Case{"in_place_journal_written", false, false},
        Case{"in_place_journal_flushed", true, true}, Case{"in_place_half_written", true, true},
        Case{"in_place_written", true, true}}) {
    ScratchDir scratch;  // a child's own: it names its files as this process would
    TempDir dir;
    const std::string path = dir.file("shard.bin");
    test::write_file_bytes(path, before);
    update_killed_at(path, c.point);
    EXPECT_EQ(exists(path + ".jask-journal"), c.journal_left) << c.point;
    if (std::string(c.point) == "in_place_half_written") {
      // Torn on disk until the replay.
      const std::vector<char> torn = test::read_file_bytes(path);
      EXPECT_NE(torn, before);
      EXPECT_NE(torn, after);
    }
    ArrayRef reopened = test::open_raw(path, kInfo, offset_of(1), /*writable=*/true);
    EXPECT_EQ(test::read_file_bytes(path), c.is_new ? after : before) << c.point;
    EXPECT_FALSE(exists(path + ".jask-journal")) << c.point;
    EXPECT_FALSE(exists(path + ".jask-journal.part")) << c.point;
  }
}

TEST(Journal, ReadersOfTheFileNeverSeeATornArrayDuringInPlaceUpdates) {
  ScratchDir scratch;
  BudgetGuard budget(4096);
  ThresholdGuard threshold(0);
  TempDir dir;
  const std::string path = dir.file("shard.bin");
  test::write_file_bytes(path, container_bytes());
  const std::vector<int32_t> a = open_container(path);
  copy_into(a[1], test::make_array(DType::f32, kInfo.shape, std::vector<double>(kNumel, 0)));
  const ArrayRef target = Registry::instance().get(a[1]);
  const ArrayRef other = Registry::instance().get(a[2]);
  const std::vector<double> other_values = test::array_values(*other);
  const int kUpdates = 12;
  std::atomic<bool> done{false};
  std::atomic<int> reads{0}, torn{0}, other_changed{0};
  std::thread reader([&] {
    std::vector<float> values(kNumel);
    while (!done) {
      {
        ReadPins pins(files_of({target}));  // one engine call's read
        for (int64_t first = 0; first < kNumel; first += 500)
          target->read_elems(values.data() + first, first, std::min<int64_t>(500, kNumel - first));
      }
      for (float v : values) torn += v != values[0];
      ReadPins pins(files_of({other}));
      other_changed += test::array_values(*other) != other_values;
      ++reads;
    }
  });
  for (int k = 1; k <= kUpdates; ++k) copy_into(a[1], fill_array(kInfo, k));
  done = true;
  reader.join();
  EXPECT_EQ(torn, 0);
  EXPECT_EQ(other_changed, 0);
  EXPECT_GT(reads, 0);
  EXPECT_EQ(test::array_values(a[1]), std::vector<double>(kNumel, kUpdates));
}

}  // namespace
}  // namespace jask
