// InflateStream, as the streamed (.npz) reader drives it: input is fed only
// when more_input() asks, and a stream whose every compressed byte is fed
// must inflate to its end without asking again. Whole-buffer deflate and
// inflate round trips past the 4 GiB a zlib call counts are in Python tests.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "base/errors.hpp"
#include "storage/codecs.hpp"

namespace jask {
namespace {

std::vector<std::byte> raw_deflate(const std::vector<std::byte>& data) {
  const CodecStep step{CodecKind::kDeflate, 6};
  std::vector<std::byte> out(encode_bound(step, data.size()));
  out.resize(encode_step(step, data.data(), data.size(), out.data(), out.size(), {}, 1, "test"));
  return out;
}

// Inflates `compressed`, fed whole at first, in calls of `piece` output bytes; returns the
// bytes inflated, failing if the stream asks for input it has all been given.
size_t inflate_in_pieces(const std::vector<std::byte>& compressed, size_t piece) {
  InflateStream stream(CodecKind::kDeflate);
  std::vector<std::byte> out(piece);
  bool fed = false;
  size_t total = 0;
  while (!stream.finished()) {
    if (stream.more_input()) {
      if (fed) {
        ADD_FAILURE() << "asked for input after all of it was fed, at " << total << " bytes";
        return total;
      }
      stream.feed(compressed.data(), compressed.size());
      fed = true;
    }
    total += stream.inflate(out.data(), out.size(), "test");
  }
  return total;
}

TEST(InflateStream, AStreamFedWholeInflatesToItsEndInAnyPieceSize) {
  // Zeros: every 258 output bytes come from a bit or two of input, so zlib has consumed the
  // whole input long before it has written all the output.
  const std::vector<std::byte> zeros(3 << 20, std::byte{0});
  const std::vector<std::byte> compressed = raw_deflate(zeros);
  for (size_t piece : {size_t{1}, size_t{7}, size_t{4096}, size_t{1} << 20})
    EXPECT_EQ(inflate_in_pieces(compressed, piece), zeros.size()) << "piece " << piece;
}

TEST(InflateStream, ATruncatedStreamAsksForMoreInput) {
  std::vector<std::byte> data(1 << 16);
  for (size_t i = 0; i < data.size(); ++i)
    data[i] = std::byte(static_cast<uint8_t>(i * 7 + i / 251));
  std::vector<std::byte> compressed = raw_deflate(data);
  compressed.resize(compressed.size() / 2);
  InflateStream stream(CodecKind::kDeflate);
  stream.feed(compressed.data(), compressed.size());
  std::vector<std::byte> out(data.size());
  size_t total = 0;
  while (!stream.more_input() && !stream.finished())
    total += stream.inflate(out.data() + total, out.size() - total, "test");
  EXPECT_FALSE(stream.finished());
  EXPECT_LT(total, data.size());
}

}  // namespace
}  // namespace jask
