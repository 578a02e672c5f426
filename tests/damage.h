// Damaging files on purpose, as a bad disk or a stray write would.
#pragma once

#include <cstdint>
#include <fstream>
#include <string>

namespace deepgrid::testing {

// Inverts the bits of the byte at `offset` of `path`.
inline void flip_byte(const std::string& path, int64_t offset) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(offset);
  char c = 0;
  f.read(&c, 1);
  c = static_cast<char>(~c);
  f.seekp(offset);
  f.write(&c, 1);
}

}  // namespace deepgrid::testing
