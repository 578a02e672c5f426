#include "deepgrid/integrity.h"

// Inlined so that XXH3 uses the widest vectors the build targets (AVX-512 with
// DEEPGRID_NATIVE: about 2.5x the packaged library's SSE2 build on planes read from memory).
// The hash values do not depend on the vector width. GCC 12 warns about its own AVX-512
// intrinsics header there (_mm512_undefined_* reported as uninitialized): a false positive.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#define XXH_INLINE_ALL
#include <xxhash.h>

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

namespace deepgrid {

using nlohmann::json;

namespace {
constexpr const char* kTableFormat = "deepgrid-checksums";
}  // namespace

std::string hash_to_hex(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

bool hash_from_hex(const std::string& s, uint64_t* v) {
  if (s.size() != 16) return false;
  uint64_t out = 0;
  for (char c : s) {
    int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (d < 0) return false;
    out = out << 4 | static_cast<uint64_t>(d);
  }
  *v = out;
  return true;
}

uint64_t plane_hash(const void* values, size_t bytes) { return XXH3_64bits(values, bytes); }

struct PlaneHasher::State {
  XXH3_state_t xxh;
};

PlaneHasher::PlaneHasher() : state_(std::make_unique<State>()) { XXH3_64bits_reset(&state_->xxh); }
PlaneHasher::~PlaneHasher() = default;

void PlaneHasher::update(const void* bytes, size_t n) {
  XXH3_64bits_update(&state_->xxh, bytes, n);
}

uint64_t PlaneHasher::digest() const { return XXH3_64bits_digest(&state_->xxh); }
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

bool PlaneChecksums::complete() const {
  return std::all_of(known_.begin(), known_.end(), [](bool k) { return k; });
}

std::string PlaneChecksums::to_json() const {
  json planes = json::array();
  for (uint64_t h : hash_) planes.push_back(hash_to_hex(h));
  return json{{"format", kTableFormat}, {"algorithm", kChecksumAlgorithm}, {"planes", planes}}
             .dump() +
         "\n";
}

Result<PlaneChecksums> PlaneChecksums::from_json(std::string_view text, int64_t planes) {
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  // A string field, or "" (json::value would throw on another type).
  auto text_field = [&](const char* key) {
    const auto it = j.find(key);
    return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  if (!j.is_object() || text_field("format") != kTableFormat) {
    return corrupt("checksum table is not valid (truncated or damaged)");
  }
  if (text_field("algorithm") != kChecksumAlgorithm) {
    return unsupported("checksum table uses algorithm '" + text_field("algorithm") +
                       "'; this deepgrid knows " + std::string(kChecksumAlgorithm));
  }
  const auto it = j.find("planes");
  if (it == j.end() || !it->is_array() || static_cast<int64_t>(it->size()) != planes) {
    return corrupt("checksum table does not hold one hash per plane (" + std::to_string(planes) +
                   ")");
  }
  PlaneChecksums t(planes);
  for (int64_t z = 0; z < planes; ++z) {
    const json& h = (*it)[static_cast<size_t>(z)];
    uint64_t v = 0;
    if (!h.is_string() || !hash_from_hex(h.get<std::string>(), &v)) {
      return corrupt("checksum table entry " + std::to_string(z) + " is not 16 hex digits");
    }
    t.set(z, v);
  }
  return t;
}

std::string checksum_file_name(int64_t generation) {
  return "checksums." + std::to_string(generation) + ".json";
}

}  // namespace deepgrid
