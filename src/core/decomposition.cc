#include "core/decomposition.h"

#include <algorithm>
#include <string>
#include <tuple>

namespace deepgrid {

namespace {

constexpr const char* kAxisName[] = {"x", "y", "z"};

int64_t extent(const Shape& s, int a) { return a == kAxisX ? s.nx : a == kAxisY ? s.ny : s.nz; }

// Piece i of n points split into p balanced pieces (the larger ones first).
Span split(int64_t n, int p, int i) {
  const int64_t base = n / p, extra = n % p;
  const int64_t lo = i * base + std::min<int64_t>(i, extra);
  return {lo, lo + base + (i < extra ? 1 : 0)};
}

}  // namespace

std::string Block::to_string() const {
  std::string out;
  for (int a = 0; a < 3; ++a) {
    if (a > 0) out += "x";
    out += '[';
    out += std::to_string((*this)[a].lo);
    out += ',';
    out += std::to_string((*this)[a].hi);
    out += ')';
  }
  return out;
}

std::array<int, 3> ProcessGrid::coords_of(int rank) const {
  return {rank % p[0], rank / p[0] % p[1], rank / (p[0] * p[1])};
}

std::string ProcessGrid::to_string() const {
  return std::to_string(p[0]) + "x" + std::to_string(p[1]) + "x" + std::to_string(p[2]);
}

Result<ProcessGrid> parse_process_grid(const std::string& text) {
  const auto bad = [&] {
    return invalid_argument("--procs " + text +
                            " is not a process grid; give PXxPYxPZ with each at least 1, e.g. "
                            "2x2x1 (their product is the number of ranks)");
  };
  ProcessGrid g;
  size_t at = 0;
  for (int a = 0; a < 3; ++a) {
    const size_t end = a < 2 ? text.find('x', at) : text.size();
    if (end == std::string::npos || end == at || end - at > 6) return bad();
    const std::string digits = text.substr(at, end - at);
    if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      return bad();
    }
    g.p[static_cast<size_t>(a)] = std::stoi(digits);
    if (g.p[static_cast<size_t>(a)] < 1) return bad();
    at = end + 1;
  }
  return g;
}

Status check_process_grid(const ProcessGrid& grid, const Shape& shape, int ranks) {
  if (grid.ranks() != ranks) {
    return invalid_argument("process grid " + grid.to_string() + " has " +
                            std::to_string(grid.ranks()) + " ranks but the job has " +
                            std::to_string(ranks) +
                            "; give --procs PXxPYxPZ whose product is the number of ranks "
                            "(mpirun -n)");
  }
  for (int a = 0; a < 3; ++a) {
    if (grid.p[static_cast<size_t>(a)] > extent(shape, a)) {
      return invalid_argument("process grid " + grid.to_string() + " splits " +
                              std::to_string(extent(shape, a)) + " points along " + kAxisName[a] +
                              " into " + std::to_string(grid.p[static_cast<size_t>(a)]) +
                              " pieces; use at most " + std::to_string(extent(shape, a)) +
                              " ranks along " + kAxisName[a]);
    }
  }
  return Status::Ok();
}

Result<ProcessGrid> choose_process_grid(const Shape& shape, int ranks) {
  // Smallest key wins: fewest axes cut into thin pieces, then the fewest pieces along x, then
  // along y (an x/y halo touches every plane of a part; a z halo only whole planes).
  std::tuple<int, int, int> best{4, 0, 0};
  ProcessGrid chosen;
  bool found = false;
  for (int px = 1; px <= ranks; ++px) {
    for (int py = 1; px * py <= ranks; ++py) {
      if (ranks % (px * py) != 0) continue;
      const ProcessGrid g{{px, py, ranks / (px * py)}};
      if (!check_process_grid(g, shape, ranks).ok()) continue;
      int thin = 0;
      for (int a = 0; a < 3; ++a) {
        const int p = g.p[static_cast<size_t>(a)];
        thin += p > 1 && extent(shape, a) / p < kThinBlock ? 1 : 0;
      }
      const std::tuple<int, int, int> key{thin, px, py};
      if (!found || key < best) best = key, chosen = g, found = true;
    }
  }
  if (!found) {
    return invalid_argument("cannot split a " + shape.to_string() + " grid over " +
                            std::to_string(ranks) +
                            " ranks: no process grid of that many ranks has at most one piece per "
                            "point along each axis; use fewer ranks (mpirun -n) or a larger grid");
  }
  return chosen;
}

std::vector<Block> decompose(const Shape& shape, const ProcessGrid& grid) {
  std::vector<Block> out;
  for (int r = 0; r < grid.ranks(); ++r) {
    const std::array<int, 3> c = grid.coords_of(r);
    Block b;
    for (int a = 0; a < 3; ++a) {
      b[a] = split(extent(shape, a), grid.p[static_cast<size_t>(a)], c[static_cast<size_t>(a)]);
    }
    out.push_back(b);
  }
  return out;
}

HaloExtent needed_halo(const Block& block, const Shape& shape, const std::array<int64_t, 3>& halo,
                       bool periodic) {
  HaloExtent h;
  for (size_t a = 0; a < 3; ++a) {
    const int ax = static_cast<int>(a);
    if (block[ax].lo == 0 && block[ax].hi == extent(shape, ax)) continue;  // not split: none
    h.below[a] = periodic ? halo[a] : std::min(halo[a], block[ax].lo);
    h.above[a] = periodic ? halo[a] : std::min(halo[a], extent(shape, ax) - block[ax].hi);
  }
  return h;
}

bool halo_suffices(const HaloExtent& held, const HaloExtent& needed, const Block& block,
                   const Shape& shape, bool periodic) {
  for (size_t a = 0; a < 3; ++a) {
    const int ax = static_cast<int>(a);
    if (held.below[a] < needed.below[a] || held.above[a] < needed.above[a]) return false;
    if (!periodic &&
        (held.below[a] > block[ax].lo || held.above[a] > extent(shape, ax) - block[ax].hi)) {
      return false;
    }
  }
  return true;
}

int64_t wrap_index(int64_t v, int64_t n, bool periodic) { return periodic ? ((v % n) + n) % n : v; }

Block intersect(const Block& a, const Block& b) {
  Block out;
  for (int ax = 0; ax < 3; ++ax) {
    out[ax].lo = std::max(a[ax].lo, b[ax].lo);
    out[ax].hi = std::max(out[ax].lo, std::min(a[ax].hi, b[ax].hi));
  }
  return out;
}

}  // namespace deepgrid
