#include "formats/raw.hpp"

#include "base/errors.hpp"

namespace jask {
namespace {

class RawFormat final : public Format {
 public:
  std::string_view name() const override { return "raw"; }

  // Any bytes can be raw: a raw file is only ever opened by name.
  bool detect(std::string_view, std::string_view) const override { return false; }

  ArrayHeader read_header(const File& file, const IoPolicy&, const std::string& path,
                          const OpenOptions& options) const override {
    if (!options.info) {
      throw ValueError(path + ": opening a raw file needs both shape= and dtype=");
    }
    const ArrayInfo& info = *options.info;
    const uint64_t size = file.size();
    if (options.offset > size) {
      throw ValueError(path + ": offset " + std::to_string(options.offset) +
                       " is past the end of the file (" + std::to_string(size) + " bytes)");
    }
    const uint64_t nbytes = check_sizes(info, path, options.offset);
    if (size - options.offset < nbytes) {
      throw ValueError(path + " is too short: " + info.describe() + " at offset " +
                       std::to_string(options.offset) + " needs " +
                       std::to_string(options.offset + nbytes) + " bytes, but the file has " +
                       std::to_string(size));
    }
    return ArrayHeader{info, Layout::contiguous(options.offset)};
  }

  Layout new_layout(const ArrayInfo&) const override { return Layout::contiguous(0); }

  void write_header(const File&, const IoPolicy&, const ArrayInfo&) const override {}
};

}  // namespace

const Format& raw_format() {
  static const RawFormat format;
  return format;
}

}  // namespace jask
