// sklearn's 1,797 8x8 handwritten digits, compiled into the CLI for `gearbox demo`: the build
// generates their definitions (build/generated/digits_data.cc) from Debian's python3-sklearn
// with scripts/export_digits.py --cc. Embedded rather than installed as files beside the
// executable: the demo then runs wherever the binary is (build tree, .deb, a copied binary, the
// Python module) with nothing to find, and no python at run time; it costs ~116 KB.
#pragma once

#include <cstddef>

namespace gearbox::cli {

inline constexpr size_t kDigitsCount = 1797;
inline constexpr size_t kDigitsPixelsPerImage = 64;
// Row-major images, pixel values 0..16 (sklearn's data; the demo divides by 16, as
// export_digits.py's x.npy does).
extern const unsigned char kDigitsPixels[kDigitsCount * kDigitsPixelsPerImage];
// Class ids 0..9.
extern const unsigned char kDigitsLabels[kDigitsCount];

}  // namespace gearbox::cli
