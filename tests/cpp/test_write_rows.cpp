// Rows written in place as one step (kernels/write_rows.hpp) and the
// journal's run table behind it (storage/journal.hpp): values against a
// reference, a lasting file's journal, replay of a committed journal of many
// runs, and the errors.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "base/errors.hpp"
#include "kernels/write_rows.hpp"
#include "storage/journal.hpp"
#include "test_util.hpp"

namespace jask {
namespace {

namespace fs = std::filesystem;
using test::array_values;
using test::BudgetGuard;
using test::decode;
using test::encode;
using test::ScratchDir;
using test::test_values;

const std::vector<int64_t> kRows = {0, 1, 2, 9, 20, 21, 36};  // runs of 3, 1, 2 and 1 rows

ArrayRef scratch_array(DType dtype, const std::vector<int64_t>& shape, int salt) {
  const ArrayInfo info{dtype, shape};
  auto a = StoredArray::create_scratch(info, "rows");
  a->write_elems(encode(dtype, test_values(info.numel(), salt)).data(), 0, info.numel());
  return a;
}

// `values` with rows kRows replaced by the rows of `rows`.
std::vector<double> with_rows(std::vector<double> values, int64_t row,
                              const std::vector<double>& rows) {
  for (size_t i = 0; i < kRows.size(); ++i)
    std::copy(rows.begin() + static_cast<int64_t>(i) * row,
              rows.begin() + static_cast<int64_t>(i + 1) * row, values.begin() + kRows[i] * row);
  return values;
}

std::vector<ByteRun> some_runs() {
  return {ByteRun{100, 7}, ByteRun{4096, 4096}, ByteRun{9000, 1}, ByteRun{20000, 333}};
}

TEST(WriteRows, JournalHeaderOfManyRunsRoundTripsAndRejectsAnyChangedByte) {
  JournalHeader h;
  h.file = FileIdentity{0x55, 0x1234567ULL};
  h.file_size = 1 << 20;
  for (uint64_t k = 0; k < 300; ++k) h.runs.push_back(ByteRun{k * 1000 + 3, 512});  // 2 blocks
  h.payload_offset = JournalHeader::payload_offset_for(h.runs);
  h.payload_crc = 0x01020304;
  const std::string bytes = h.encode();
  ASSERT_EQ(bytes.size(), 2 * JournalHeader::kHeaderBytes);
  EXPECT_EQ(h.payload_offset, bytes.size());  // the payload follows the run table, packed
  EXPECT_EQ(JournalHeader::size_from(bytes.substr(0, JournalHeader::kHeaderBytes)), bytes.size());
  const std::optional<JournalHeader> back = JournalHeader::decode(bytes);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->file, h.file);
  EXPECT_EQ(back->file_size, h.file_size);
  EXPECT_EQ(back->payload_crc, h.payload_crc);
  EXPECT_EQ(back->length(), 300u * 512u);
  ASSERT_EQ(back->runs.size(), h.runs.size());
  for (size_t k = 0; k < h.runs.size(); ++k) {
    EXPECT_EQ(back->runs[k].offset, h.runs[k].offset);
    EXPECT_EQ(back->runs[k].length, h.runs[k].length);
  }
  const size_t fields = 16 + 5 * 8 + 4 + 16 * 300 + 4;  // the checksummed bytes
  for (size_t i = 0; i < fields; i += 7) {
    std::string changed = bytes;
    changed[i] = static_cast<char>(changed[i] ^ 0x10);
    EXPECT_FALSE(JournalHeader::decode(changed).has_value()) << "byte " << i;
  }
  EXPECT_FALSE(JournalHeader::decode(bytes.substr(0, bytes.size() - 1)).has_value());
  JournalHeader overlapping = h;
  overlapping.runs[1].offset = overlapping.runs[0].offset + 100;  // inside run 0
  EXPECT_FALSE(JournalHeader::decode(overlapping.encode()).has_value());
  JournalHeader beyond = h;
  beyond.runs.back().length = h.file_size;  // past the file's end
  EXPECT_FALSE(JournalHeader::decode(beyond.encode()).has_value());
}

TEST(WriteRows, ScratchArraysOfDifferentRowSizesAndDTypesGetTheirRowsAndNothingElse) {
  ScratchDir scratch;
  BudgetGuard budget(4096);
  const int64_t n = 37;
  ArrayRef table = scratch_array(DType::f32, {n, 5}, 1);
  ArrayRef state = scratch_array(DType::bf16, {n, 5}, 2);
  ArrayRef wide = scratch_array(DType::f64, {n, 3, 2}, 3);
  const std::vector<ArrayRef> arrays = {table, state, wide};
  std::vector<std::vector<double>> before, rows;
  std::vector<std::vector<unsigned char>> stored;
  for (size_t k = 0; k < arrays.size(); ++k) {
    before.push_back(array_values(*arrays[k]));
    const int64_t row = arrays[k]->info().numel() / n;
    // One slot more than the rows: the kernel ignores what is past them.
    rows.push_back(test_values(static_cast<int64_t>(kRows.size() + 1) * row, 10 + k, 6, 0.5));
    stored.push_back(encode(arrays[k]->info().dtype, rows.back()));
  }
  std::vector<const void*> values;
  std::vector<uint64_t> bytes;
  for (const auto& s : stored) {
    values.push_back(s.data());
    bytes.push_back(s.size());
  }
  write_rows(arrays, kRows, values, bytes);
  for (size_t k = 0; k < arrays.size(); ++k) {
    const int64_t row = arrays[k]->info().numel() / n;
    const std::vector<double> expected = with_rows(before[k], row, rows[k]);
    EXPECT_EQ(array_values(*arrays[k]), expected) << "array " << k;
  }
}

TEST(WriteRows, ALastingFileIsWrittenInPlaceThroughAJournalThatIsThenRemoved) {
  ScratchDir scratch;
  test::TempDir dir;
  const std::string path = dir.path() + "/table.npy";
  const ArrayInfo info{DType::f32, {37, 4}};
  {
    auto made = StoredArray::create_file(path, info);
    made->write_elems(encode(DType::f32, test_values(info.numel(), 4)).data(), 0, info.numel());
  }
  ArrayRef table = test::open_npy(path, /*writable=*/true);
  ArrayRef moment = scratch_array(DType::f32, {37, 4}, 5);
  const std::vector<double> before = array_values(*table), moment_before = array_values(*moment);
  const std::vector<double> new_rows = test_values(static_cast<int64_t>(kRows.size()) * 4, 6);
  const std::vector<double> new_moment = test_values(static_cast<int64_t>(kRows.size()) * 4, 7);
  const auto a = encode(DType::f32, new_rows), b = encode(DType::f32, new_moment);
  write_rows({table, moment}, kRows, {a.data(), b.data()}, {a.size(), b.size()});
  EXPECT_FALSE(fs::exists(journal_path(path)));
  EXPECT_EQ(array_values(*table), with_rows(before, 4, new_rows));
  EXPECT_EQ(array_values(*moment), with_rows(moment_before, 4, new_moment));
  // The file itself holds them (not a renamed copy: the open's bytes are the path's).
  EXPECT_EQ(array_values(*test::open_npy(path, false)), with_rows(before, 4, new_rows));
}

TEST(WriteRows, ACommittedJournalOfManyRunsIsReplayedAtTheNextOpen) {
  ScratchDir scratch;
  BudgetGuard budget(4096);  // the replay copies through one small block
  test::TempDir dir;
  const std::string path = dir.path() + "/file.bin";
  std::vector<char> bytes(30000);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 7 % 251);
  test::write_file_bytes(path, bytes);
  const std::vector<ByteRun> runs = some_runs();
  std::vector<char> payload;
  for (const ByteRun& r : runs)
    for (uint64_t i = 0; i < r.length; ++i)
      payload.push_back(static_cast<char>((i * 13 + 5) % 256));
  {
    File file(path, OpenMode::kReadWrite);
    JournalWriter journal(path, file, runs);
    journal.file()->write_at(payload.data(), payload.size(), journal.payload_offset(), io_policy());
    journal.wrote(payload.data(), payload.size(), journal.payload_offset());
    journal.commit();  // then abandoned, as by a writer killed before writing in place
  }
  ASSERT_TRUE(fs::exists(journal_path(path)));
  recover_journal(path);
  EXPECT_FALSE(fs::exists(journal_path(path)));
  std::vector<char> expected = bytes;
  size_t at = 0;
  for (const ByteRun& r : runs) {
    std::copy(payload.begin() + static_cast<int64_t>(at),
              payload.begin() + static_cast<int64_t>(at + r.length),
              expected.begin() + static_cast<int64_t>(r.offset));
    at += r.length;
  }
  EXPECT_EQ(test::read_file_bytes(path), expected);
  recover_journal(path);  // nothing left: nothing changes
  EXPECT_EQ(test::read_file_bytes(path), expected);
}

TEST(WriteRows, AnUncommittedJournalOfManyRunsIsDiscardedAndTheFileUntouched) {
  ScratchDir scratch;
  test::TempDir dir;
  const std::string path = dir.path() + "/file.bin";
  const std::vector<char> bytes(30000, 'x');
  test::write_file_bytes(path, bytes);
  {
    File file(path, OpenMode::kReadWrite);
    JournalWriter journal(path, file, some_runs());
    const std::vector<char> payload(journal.payload_offset(), 'y');
    journal.file()->write_at(payload.data(), 100, journal.payload_offset(), io_policy());
  }  // destroyed before its commit point
  recover_journal(path);
  EXPECT_FALSE(fs::exists(journal_path(path)));
  EXPECT_FALSE(fs::exists(journal_path(path) + ".part"));
  EXPECT_EQ(test::read_file_bytes(path), bytes);
}

TEST(WriteRows, BadRowsAndArraysAreRefusedBeforeAnythingIsWritten) {
  ScratchDir scratch;
  test::TempDir dir;
  ArrayRef a = scratch_array(DType::f32, {10, 2}, 1);
  ArrayRef shorter = scratch_array(DType::f32, {9, 2}, 2);
  const std::vector<double> before = array_values(*a);
  const auto rows = encode(DType::f32, test_values(6, 3));
  auto refused = [&](const std::vector<ArrayRef>& arrays, const std::vector<int64_t>& idx,
                     const std::string& needle) {
    std::vector<const void*> values(arrays.size(), rows.data());
    std::vector<uint64_t> sizes(arrays.size(), rows.size());
    try {
      write_rows(arrays, idx, values, sizes);
      ADD_FAILURE() << "accepted: " << needle;
    } catch (const std::exception& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  refused({a}, {2, 1}, "must ascend");
  refused({a}, {3, 3}, "must ascend");
  refused({a}, {10}, "out of [0, 10)");
  refused({a}, {-1}, "out of [0, 10)");
  refused({a}, {0, 1, 2, 3}, "bytes of new rows for 4 rows");
  refused({a, shorter}, {0}, "leading length 10");
  refused({a, StoredArray::reshaped(a, {10, 2})}, {0}, "in one file");
  std::vector<ArrayRef> lasting;
  for (const char* name : {"/p.npy", "/q.npy"}) {
    auto f = StoredArray::create_file(dir.path() + name, ArrayInfo{DType::f32, {10, 2}});
    lasting.push_back(f);
  }
  refused(lasting, {0}, "more than one of the arrays is a lasting file");
  ArrayRef read_only = test::open_npy(dir.path() + "/p.npy", false);
  refused({read_only}, {0}, "read-only");
  EXPECT_EQ(array_values(*a), before);
}

TEST(WriteRows, TheKernelSkipsUnusedSlotsAndReturnsTheSameArrays) {
  ScratchDir scratch;
  const int32_t h = test::make_array(DType::f32, {6, 2}, test_values(12, 1));
  const std::vector<int32_t> idx = {1, 4, -1, -1};
  const std::vector<double> rows = {10, 11, 40, 41, 99, 99, 99, 99};
  const auto stored = encode(DType::f32, rows);
  const KernelResult r = test::run_call(
      ResultKind::kArrays, "write_rows", {h}, {},
      {MemoryOperand{idx.data(), idx.size() * 4}, MemoryOperand{stored.data(), stored.size()}},
      Attrs{{"index_itemsize", int64_t{4}}});
  ASSERT_EQ(r.handles.size(), 1u);
  EXPECT_EQ(Registry::instance().get(r.handles[0]), Registry::instance().get(h));
  std::vector<double> expected = test_values(12, 1);
  expected[2] = 10, expected[3] = 11, expected[8] = 40, expected[9] = 41;
  EXPECT_EQ(array_values(h), expected);
  const std::vector<int32_t> gap = {1, -1, 4, -1};
  EXPECT_THROW(test::run_call(ResultKind::kArrays, "write_rows", {h}, {},
                              {MemoryOperand{gap.data(), gap.size() * 4},
                               MemoryOperand{stored.data(), stored.size()}},
                              Attrs{{"index_itemsize", int64_t{4}}}),
               ValueError);
}

}  // namespace
}  // namespace jask
