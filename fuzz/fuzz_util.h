// Shared by the fuzz targets: what a target does when a property it checks does not hold.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

namespace hangar::fuzz {

// A broken property is a crash to libFuzzer: it saves the input that broke it.
[[noreturn]] inline void Fail(const std::string& what) {
  std::fprintf(stderr, "fuzz property broken: %s\n", what.c_str());
  std::abort();
}

inline std::string_view AsText(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

}  // namespace hangar::fuzz
