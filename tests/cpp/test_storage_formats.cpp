// The storage layer's plug-in formats (the registry, detection, one open
// path) and the per-file table that arrays of one file share.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "base/errors.hpp"
#include "formats/npy.hpp"
#include "formats/raw.hpp"
#include "formats/registry.hpp"
#include "kernels/ops.hpp"
#include "test_util.hpp"

namespace jask {
namespace {

namespace fs = std::filesystem;
using test::expect_error_mentioning;
using test::TempDir;

const ArrayInfo kInfo{DType::f32, {5, 7}};

TEST(Formats, RegistryNamesEveryPlugInAndRejectsUnknownNames) {
  EXPECT_EQ(format_names(), (std::vector<std::string>{"npy", "raw"}));
  EXPECT_EQ(&format_named("npy"), &npy_format());
  EXPECT_EQ(&format_named("raw"), &raw_format());
  expect_error_mentioning<ValueError>([] { format_named("zarr"); }, {"zarr", "'npy'", "'raw'"});
}

TEST(Formats, NpyIsDetectedByItsMagicAndRawNever) {
  const std::string header = make_npy_header(DType::f32, {3});
  EXPECT_EQ(detect_format(header.substr(0, kDetectBytes), "x.bin"), &npy_format());
  EXPECT_EQ(detect_format("PK\x03\x04 not npy", "x.npy"), nullptr);
  EXPECT_EQ(detect_format("", "empty.npy"), nullptr);
}

TEST(Formats, OpenWithoutAFormatDetectsNpyAndNamesTheRawOptionOtherwise) {
  TempDir dir;
  const std::string npy = dir.file("a.npy"), raw = dir.file("a.bin");
  StoredArray::create_file(npy, kInfo);
  ArrayRef detected = StoredArray::open(npy, "", OpenOptions{});
  EXPECT_EQ(detected->info().describe(), kInfo.describe());
  EXPECT_EQ(detected->data_offset(), make_npy_header(DType::f32, kInfo.shape).size());
  test::write_file_bytes(raw, std::vector<char>(kInfo.nbytes(), 'x'));
  expect_error_mentioning<ValueError>([&] { StoredArray::open(raw, "", OpenOptions{}); },
                                      {raw, "shape= and dtype="});
  expect_error_mentioning<ValueError>([&] { StoredArray::open(raw, "raw", OpenOptions{}); },
                                      {raw, "shape= and dtype="});
  expect_error_mentioning<ValueError>([&] { StoredArray::open(raw, "npy", OpenOptions{}); },
                                      {raw, "not a .npy file"});
}

TEST(Formats, RawLayoutStartsAtTheGivenOffsetAndChecksTheFileSize) {
  TempDir dir;
  const std::string raw = dir.file("a.bin");
  test::write_file_bytes(raw, std::vector<char>(100 + kInfo.nbytes(), 0));
  ArrayRef a = test::open_raw(raw, kInfo, 100, false);
  EXPECT_EQ(a->data_offset(), 100u);
  EXPECT_EQ(a->byte_of(3), 100u + 3 * 4);
  expect_error_mentioning<ValueError>([&] { test::open_raw(raw, kInfo, 101, false); },
                                      {raw, "too short", "offset 101"});
}

TEST(Formats, ViewsShiftTheLayoutByTheirFirstElement) {
  TempDir dir;
  const std::string raw = dir.file("a.bin");
  test::write_file_bytes(raw, std::vector<char>(64 + kInfo.nbytes(), 0));
  ArrayRef a = test::open_raw(raw, kInfo, 64, false);
  ArrayRef v = StoredArray::viewed(a, 7, {4, 7});
  EXPECT_EQ(v->data_offset(), 64u + 7 * 4);
  EXPECT_EQ(v->byte_of(1), a->byte_of(8));
}

// --- sizes: every product and sum checked, none wraps ---

TEST(Sizes, CheckSizesReturnsTheByteCountOfEveryShapeThatFits) {
  EXPECT_EQ(check_sizes(ArrayInfo{DType::f32, {5, 7}}, "a"), 140u);
  EXPECT_EQ(check_sizes(ArrayInfo{DType::f64, {}}, "a"), 8u);
  EXPECT_EQ(check_sizes(ArrayInfo{DType::f64, {0, int64_t{1} << 40}}, "a"), 0u);
  // As NumPy does, a 0 counts as 1: the other dimensions must fit by themselves.
  EXPECT_THROW(check_sizes(ArrayInfo{DType::f64, {0, int64_t{1} << 62, 4}}, "a"), ValueError);
  // The largest: 2**63 - 1 one-byte elements at offset 0.
  const ArrayInfo largest{DType::b8, {std::numeric_limits<int64_t>::max()}};
  EXPECT_EQ(check_sizes(largest, "a"), kMaxFileBytes);
  expect_error_mentioning<ValueError>([&] { check_sizes(largest, "/d/a.bin", 1); },
                                      {"/d/a.bin", "offset 1"});
}

TEST(Sizes, ProductsThatWrapAreValueErrorsNamingShapeAndDtype) {
  // The byte count of (2048, 2**51 + 1) float32 is 2**64 + 8192: it wrapped to 8192.
  const int64_t wraps = (int64_t{1} << 51) + 1;
  expect_error_mentioning<ValueError>(
      [&] {
        check_sizes(ArrayInfo{DType::f32, {2048, wraps}}, "jask.full");
      },
      {"jask.full", "(2048, 2251799813685249)", "float32", "bytes"});
  const std::vector<std::vector<int64_t>> too_large = {
      {int64_t{1} << 32, int64_t{1} << 32},  // elements wrap to 0
      {int64_t{1} << 62, 4},                 // elements wrap to 0
      {int64_t{1} << 62, 1},                 // elements fit, bytes do not
      {3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3,
       3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3}};  // 3**41
  for (const auto& shape : too_large) {
    EXPECT_THROW(check_sizes(ArrayInfo{DType::f32, shape}, "x"), ValueError) << shape.size();
  }
  expect_error_mentioning<ValueError>(
      [&] {
        check_sizes(ArrayInfo{DType::f32, {3, -1}}, "x");
      },
      {"negative", "(3, -1)"});
}

TEST(Sizes, ARawOffsetPastTheFileOrWrappingPastItIsRefused) {
  TempDir dir;
  const std::string raw = dir.file("a.bin");
  test::write_file_bytes(raw, std::vector<char>(4096, 0));
  // offset 2**64 - 8: offset + bytes used to wrap to a small number.
  expect_error_mentioning<ValueError>(
      [&] {
        test::open_raw(raw, ArrayInfo{DType::f64, {2}}, ~uint64_t{7}, false);
      },
      {raw, "offset 18446744073709551608", "past the end", "4096 bytes"});
  expect_error_mentioning<ValueError>(
      [&] {
        test::open_raw(raw, ArrayInfo{DType::f32, {int64_t{1} << 61}}, 8, false);
      },
      {raw, "(2305843009213693952,)", "float32"});
  EXPECT_EQ(test::open_raw(raw, ArrayInfo{DType::f32, {0}}, 4096, false)->data_offset(), 4096u);
}

TEST(Sizes, AnNpyHeaderWithAHugeShapeIsRefusedWhateverTheFileSize) {
  TempDir dir;
  const std::vector<std::vector<int64_t>> shapes = {
      {int64_t{1} << 32, int64_t{1} << 32}, {int64_t{1} << 62, 4}, {2048, (int64_t{1} << 51) + 1}};
  for (const auto& shape : shapes) {
    const std::string path = dir.file("h.npy");
    std::string header = make_npy_header(DType::f32, shape);
    test::write_file_bytes(path, std::vector<char>(header.begin(), header.end()));
    expect_error_mentioning<ValueError>([&] { StoredArray::open(path, "", OpenOptions{}); },
                                        {path, shape_repr(shape), "float32"});
  }
}

TEST(Sizes, CreatingReshapingAndViewingCheckTheSizes) {
  TempDir dir;
  const std::string path = dir.file("new.npy");
  expect_error_mentioning<ValueError>(
      [&] {
        StoredArray::create_file(path, ArrayInfo{DType::f32, {2048, (int64_t{1} << 51) + 1}});
      },
      {path, "(2048, 2251799813685249)"});
  EXPECT_FALSE(fs::exists(path));  // refused before the file was made
  ArrayRef a = StoredArray::create_file(path, kInfo);
  EXPECT_THROW(StoredArray::reshaped(a, {int64_t{1} << 62, 4}), ValueError);
  EXPECT_THROW(StoredArray::viewed(a, 1, {int64_t{1} << 62, 4}), ValueError);
  EXPECT_THROW(StoredArray::viewed(a, std::numeric_limits<int64_t>::max(), {2}), ValueError);
}

// --- files that are not regular files ---

TEST(Files, FifosDevicesAndDirectoriesAreRefusedAtOpenWithoutBlocking) {
  TempDir dir;
  const std::string fifo = dir.file("pipe.npy");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // Opening a FIFO for reading blocks until a writer comes; this returns at once.
  for (OpenMode mode : {OpenMode::kReadOnly, OpenMode::kReadWrite, OpenMode::kCreateTruncate}) {
    expect_error_mentioning<IoError>([&] { File f(fifo, mode); }, {fifo, "a FIFO", "regular"});
  }
  expect_error_mentioning<IoError>([&] { StoredArray::open(fifo, "", OpenOptions{}); },
                                   {fifo, "a FIFO"});
  expect_error_mentioning<IoError>([&] { File f("/dev/null", OpenMode::kReadOnly); },
                                   {"/dev/null", "a character device"});
  expect_error_mentioning<DirectoryError>([&] { File f(dir.path(), OpenMode::kReadOnly); },
                                          {dir.path(), "directory"});
  expect_error_mentioning<DirectoryError>([&] { File f(dir.path(), OpenMode::kReadWrite); },
                                          {dir.path(), "directory"});
  // A symlink to a regular file still opens.
  const std::string target = dir.file("a.npy");
  StoredArray::create_file(target, kInfo);
  fs::create_symlink("a.npy", dir.file("link.npy"));
  EXPECT_EQ(StoredArray::open(dir.file("link.npy"), "", OpenOptions{})->info().describe(),
            kInfo.describe());
}

TEST(FileTable, ArraysOfOneFileShareOneOpenWhateverThePathSpelling) {
  TempDir dir;
  const std::string path = dir.file("a.bin");
  test::write_file_bytes(path, std::vector<char>(2 * kInfo.nbytes(), 0));
  fs::create_symlink("a.bin", dir.file("link.bin"));
  const size_t before = FileTable::instance().size();
  ArrayRef first = test::open_raw(path, kInfo, 0, false);
  ArrayRef second = test::open_raw(dir.file("link.bin"), kInfo, kInfo.nbytes(), false);
  ArrayRef third = test::open_raw(dir.path() + "/./a.bin", kInfo, 0, false);
  EXPECT_EQ(FileTable::instance().size(), before + 1);
  EXPECT_EQ(first->file(), second->file());
  EXPECT_EQ(first->file(), third->file());
  EXPECT_EQ(second->path(), dir.file("link.bin")) << "each array keeps the path it was opened by";
  first.reset();
  second.reset();
  third.reset();
  EXPECT_EQ(FileTable::instance().size(), before) << "the entry goes with the last array";
}

TEST(FileTable, AWritableOpenOfAFileOpenReadOnlyReopensItForBoth) {
  TempDir dir;
  const std::string path = dir.file("a.bin");
  test::write_file_bytes(path, std::vector<char>(kInfo.nbytes(), 0));
  ArrayRef reader = test::open_raw(path, kInfo, 0, false);
  EXPECT_FALSE(reader->file()->writable());
  ArrayRef writer = test::open_raw(path, kInfo, 0, true);
  EXPECT_EQ(reader->file(), writer->file());
  EXPECT_TRUE(writer->writable());
  EXPECT_FALSE(reader->writable()) << "the array opened read-only stays read-only";
  std::vector<float> zeros(static_cast<size_t>(kInfo.numel()), 0.0f);
  EXPECT_THROW(reader->write_elems(zeros.data(), 0, kInfo.numel()), ReadOnlyError);
}

TEST(FileTable, AfterAnUpdateAnOpenOfThePathFindsTheSameEntry) {
  test::ScratchDir scratch;
  TempDir dir;
  const std::string path = dir.file("a.bin");
  test::write_file_bytes(path, std::vector<char>(2 * kInfo.nbytes(), 0));
  int32_t a = Registry::instance().add(test::open_raw(path, kInfo, 0, true));
  const std::vector<double> values = test::test_values(kInfo.numel(), 4);
  copy_into(a, test::make_array(DType::f32, kInfo.shape, values));
  ArrayRef later = test::open_raw(path, kInfo, kInfo.nbytes(), false);
  EXPECT_EQ(later->file(), Registry::instance().get(a)->file());
  ArrayRef again = test::open_raw(path, kInfo, 0, false);
  EXPECT_EQ(test::array_values(*again), values);
  Registry::instance().release_floating(a);
}

}  // namespace
}  // namespace jask
