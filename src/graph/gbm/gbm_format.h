// The .gbm container: a fixed 64-byte little-endian header, then the FlatBuffers metadata
// (gbm.fbs), then a 64-byte-aligned weight blob. See docs/gbm.md.
//
//   offset  size  field
//   0       4     magic "GBM1"
//   4       4     format version (u32)
//   8       4     header size (u32, 64)
//   12      4     flags (u32, 0)
//   16      8     metadata offset     24  8  metadata size
//   32      8     weight blob offset  40  8  weight blob size
//   48      8     checksum of every byte after the header (gbm_checksum)
//   56      8     reserved (0)
#pragma once

#include <cstddef>
#include <cstdint>

namespace gearbox::gbm {

inline constexpr char kMagic[4] = {'G', 'B', 'M', '1'};
// 2: subgraphs, sequence and optional value types, per-node engines (version 1 files still load).
inline constexpr uint32_t kFormatVersion = 2;
inline constexpr uint32_t kHeaderSize = 64;
inline constexpr size_t kBlobAlignment = 64;
// The onnx metadata key with the same meaning as the .gbm's required ISA list (gearbox doctor).
inline constexpr const char* kRequiredIsaKey = "gearbox.required_isa";

struct Header {
  uint32_t version = kFormatVersion;
  uint32_t header_size = kHeaderSize;
  uint32_t flags = 0;
  uint64_t meta_offset = 0, meta_size = 0;
  uint64_t blob_offset = 0, blob_size = 0;
  uint64_t checksum = 0;
};

// FNV-1a 64 over little-endian 64-bit words (then the tail bytes one by one): word-wise so
// that checking a 100 MB weight blob costs tens of milliseconds, not hundreds.
uint64_t gbm_checksum(const uint8_t* data, size_t size);

}  // namespace gearbox::gbm
