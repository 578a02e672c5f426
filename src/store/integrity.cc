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

namespace {
bool hashes_components_apart(const PlaneHashing& h) { return h.by_component && h.components > 1; }

// "xxh3-64-fields": the hash of the components' digests.
uint64_t hash_of_digests(const std::vector<uint64_t>& digests) {
  std::vector<unsigned char> bytes;
  for (uint64_t d : digests) {
    for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<unsigned char>(d >> (8 * i)));
  }
  return XXH3_64bits(bytes.data(), bytes.size());
}
}  // namespace

uint64_t plane_hash(const void* values, const PlaneHashing& h) {
  if (!hashes_components_apart(h)) {
    return plane_hash(values, h.component_bytes * static_cast<size_t>(h.components));
  }
  std::vector<uint64_t> digests;
  for (int c = 0; c < h.components; ++c) {
    digests.push_back(plane_hash(static_cast<const std::byte*>(values) + c * h.component_bytes,
                                 h.component_bytes));
  }
  return hash_of_digests(digests);
}

// One XXH3 state per component hashed apart (else one), and how far update() has come.
struct PlaneHasher::State {
  PlaneHashing how;
  std::vector<XXH3_state_t> xxh;
  size_t offset = 0;
};

PlaneHasher::PlaneHasher() : PlaneHasher(PlaneHashing{}) {}

PlaneHasher::PlaneHasher(const PlaneHashing& h) : state_(std::make_unique<State>()) {
  state_->how = h;
  state_->xxh.resize(hashes_components_apart(h) ? static_cast<size_t>(h.components) : 1);
  for (XXH3_state_t& x : state_->xxh) XXH3_64bits_reset(&x);
}
PlaneHasher::~PlaneHasher() = default;
PlaneHasher::PlaneHasher(PlaneHasher&&) noexcept = default;
PlaneHasher& PlaneHasher::operator=(PlaneHasher&&) noexcept = default;

void PlaneHasher::update(const void* bytes, size_t n) {
  State& s = *state_;
  if (s.xxh.size() == 1) {
    XXH3_64bits_update(&s.xxh[0], bytes, n);
    return;
  }
  const auto* p = static_cast<const std::byte*>(bytes);
  while (n > 0) {  // split where a component ends
    const size_t c = s.offset / s.how.component_bytes;
    const size_t take = std::min(n, (c + 1) * s.how.component_bytes - s.offset);
    XXH3_64bits_update(&s.xxh[c], p, take);
    p += take;
    n -= take;
    s.offset += take;
  }
}

void PlaneHasher::update_component(int c, const void* bytes, size_t n) {
  XXH3_64bits_update(&state_->xxh[state_->xxh.size() == 1 ? 0 : static_cast<size_t>(c)], bytes, n);
}

uint64_t PlaneHasher::digest() const {
  if (state_->xxh.size() == 1) return XXH3_64bits_digest(&state_->xxh[0]);
  std::vector<uint64_t> digests;
  for (const XXH3_state_t& x : state_->xxh) digests.push_back(XXH3_64bits_digest(&x));
  return hash_of_digests(digests);
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

bool PlaneChecksums::complete() const {
  return std::all_of(known_.begin(), known_.end(), [](bool k) { return k; });
}

std::string PlaneChecksums::to_json(std::string_view algorithm) const {
  json planes = json::array();
  for (uint64_t h : hash_) planes.push_back(hash_to_hex(h));
  return json{{"format", kTableFormat}, {"algorithm", algorithm}, {"planes", planes}}.dump() + "\n";
}

Result<PlaneChecksums> PlaneChecksums::from_json(std::string_view text, int64_t planes,
                                                 std::string_view algorithm) {
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  // A string field, or "" (json::value would throw on another type).
  auto text_field = [&](const char* key) {
    const auto it = j.find(key);
    return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  if (!j.is_object() || text_field("format") != kTableFormat) {
    return corrupt("checksum table is not valid (truncated or damaged)");
  }
  if (text_field("algorithm") != algorithm) {
    return corrupt("checksum table uses algorithm '" + text_field("algorithm") +
                   "' where the manifest names " + std::string(algorithm));
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
