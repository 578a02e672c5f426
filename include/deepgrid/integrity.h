// Integrity: an XXH3-64 hash of every plane (how: PlaneHashing), kept beside the manifest in a
// checksum table (DIR/checksums.<generation>.json) that is committed with it. Every writer records
// the hashes of the planes it writes; `deepgrid fsck` and verified reads compare them.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "deepgrid/status.h"

namespace deepgrid {

// How a plane's hash is made, by the name the manifest and the table record:
// - "xxh3-64": XXH3-64 of the plane's values (plane_bytes, not the padding after them);
// - "xxh3-64-fields": of a plane of several components (store.h), XXH3-64 of the components'
//   XXH3-64 digests (8 bytes each, little-endian, in component order); of a plane of one
//   component, XXH3-64 of its values, as above. Each component hashed apart lets a band of
//   rows (stream_bands.h) hash its rows of every component while the others are still to come.
// Grids of several fields are written with the second since 2026-11-30; older ones keep the
// first until a run upgrades them (upgrade_checksums).
inline constexpr std::string_view kChecksumAlgorithm = "xxh3-64";
inline constexpr std::string_view kComponentChecksumAlgorithm = "xxh3-64-fields";

// A grid's way of hashing its planes (Manifest::plane_hashing).
struct PlaneHashing {
  bool by_component = false;  // "xxh3-64-fields" on a plane of several components
  int components = 1;
  size_t component_bytes = 0;  // nx * ny * dtype size (by_component only)
};

// XXH3-64 of `bytes` bytes: a plane's hash under "xxh3-64".
uint64_t plane_hash(const void* values, size_t bytes);
// A plane's hash as `h` makes it (the plane's components * component_bytes bytes).
uint64_t plane_hash(const void* values, const PlaneHashing& h);

// plane_hash computed piece by piece: the digest of the bytes given to update(), in order, equals
// plane_hash of them all at once. Lets a copy hash what it copies while it is in cache. Pieces
// may also be given component by component (update_component): each component's bytes in
// order, and, with a hashing by component, the components in any order and from different
// threads at once, one thread per component (else in order: the plane is one run of bytes);
// never both ways for one plane.
class PlaneHasher {
 public:
  PlaneHasher();
  explicit PlaneHasher(const PlaneHashing& h);
  ~PlaneHasher();
  PlaneHasher(PlaneHasher&&) noexcept;
  PlaneHasher& operator=(PlaneHasher&&) noexcept;
  void update(const void* bytes, size_t n);
  void update_component(int c, const void* bytes, size_t n);
  uint64_t digest() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// A hash as written in deepgrid's JSON files: 16 lowercase hex digits; parsing accepts exactly
// that.
std::string hash_to_hex(uint64_t hash);
bool hash_from_hex(const std::string& text, uint64_t* hash);

// The hash of each plane of a grid, and which of them are known.
class PlaneChecksums {
 public:
  PlaneChecksums() = default;
  explicit PlaneChecksums(int64_t planes)
      : hash_(static_cast<size_t>(planes)), known_(static_cast<size_t>(planes), false) {}

  int64_t planes() const { return static_cast<int64_t>(hash_.size()); }
  bool known(int64_t z) const { return known_[static_cast<size_t>(z)]; }
  uint64_t hash(int64_t z) const { return hash_[static_cast<size_t>(z)]; }
  void set(int64_t z, uint64_t h) {
    hash_[static_cast<size_t>(z)] = h;
    known_[static_cast<size_t>(z)] = true;
  }
  // Every plane has a hash: the table can be committed.
  bool complete() const;

  // {"format": "deepgrid-checksums", "algorithm": "xxh3-64", "planes": ["16 hex digits", ...]},
  // the algorithm the manifest names.
  std::string to_json(std::string_view algorithm) const;
  // Parses a table and checks that it holds exactly `planes` hashes made by `algorithm`.
  static Result<PlaneChecksums> from_json(std::string_view text, int64_t planes,
                                          std::string_view algorithm);

 private:
  std::vector<uint64_t> hash_;
  std::vector<bool> known_;
};

// The name of the table of a given generation (the manifest names the current one).
std::string checksum_file_name(int64_t generation);

}  // namespace deepgrid
