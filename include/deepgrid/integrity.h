// Integrity: an XXH3-64 hash of every plane's values, kept beside the manifest in a checksum
// table (DIR/checksums.<generation>.json) that is committed with it. Every writer records the
// hashes of the planes it writes; `deepgrid fsck` and verified reads compare them.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "deepgrid/status.h"

namespace deepgrid {

inline constexpr std::string_view kChecksumAlgorithm = "xxh3-64";

// XXH3-64 of one plane's values: its plane_bytes, not the padding after them.
uint64_t plane_hash(const void* values, size_t bytes);

// plane_hash computed piece by piece: the digest of the bytes given to update(), in order, equals
// plane_hash of them all at once. Lets a copy hash what it copies while it is in cache.
class PlaneHasher {
 public:
  PlaneHasher();
  ~PlaneHasher();
  PlaneHasher(const PlaneHasher&) = delete;
  PlaneHasher& operator=(const PlaneHasher&) = delete;
  void update(const void* bytes, size_t n);
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

  // {"format": "deepgrid-checksums", "algorithm": "xxh3-64", "planes": ["16 hex digits", ...]}
  std::string to_json() const;
  // Parses a table and checks that it holds exactly `planes` hashes.
  static Result<PlaneChecksums> from_json(std::string_view text, int64_t planes);

 private:
  std::vector<uint64_t> hash_;
  std::vector<bool> known_;
};

// The name of the table of a given generation (the manifest names the current one).
std::string checksum_file_name(int64_t generation);

}  // namespace deepgrid
