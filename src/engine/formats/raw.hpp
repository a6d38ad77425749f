// The raw format plug-in: a file of bare elements in C order, with no
// header. The caller gives the dtype, the shape and the offset of the first
// element (OpenOptions), as for numpy.memmap; the bytes around them (another
// array, a foreign header) are not the array's.
#pragma once
#include "formats/format.hpp"

namespace jask {

const Format& raw_format();

}  // namespace jask
