// The storage layer's plug-in formats (the registry, detection, one open
// path) and the per-file table that arrays of one file share.
#include <gtest/gtest.h>

#include <filesystem>
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
