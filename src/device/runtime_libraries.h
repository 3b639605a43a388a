// The shared libraries gearbox depends on, as built against and as loaded at run time, so
// `gearbox doctor` can spot "built against X, running with Y" mismatches.
#pragma once

#include <string>
#include <vector>

namespace gearbox::device {

struct LibraryVersion {
  std::string name;           // "oneDNN", "protobuf", "onnx"
  std::string build_version;  // from headers or the build's package search ("" if unknown)
  std::string build_path;     // the library file linked at build time ("" if not linked)
  std::string runtime_version;  // "" when not loaded / not loadable
  std::string runtime_path;     // resolved path of the loaded file
  bool loaded = false;
  bool match = false;         // same version (oneDNN) or same resolved file (linked libraries)
  std::string note;
};

std::vector<LibraryVersion> runtime_libraries();

}  // namespace gearbox::device
