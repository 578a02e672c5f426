// A distributed grid: one grid split into z-slabs over the ranks of an MPI job, each rank's
// part an ordinary grid (its own manifest, data files on its own store directories, checksums)
// holding its slab and the halo planes around it. A top-level manifest in DIR records the
// decomposition. This header needs no MPI: a serial process reads a distributed grid through
// its parts when their directories are reachable (one machine, or a shared filesystem).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "deepgrid/decomposition.h"
#include "deepgrid/io/plane_transfer.h"
#include "deepgrid/store.h"

namespace deepgrid {

// Version 4 of the format introduced distributed grids; serial grids are still version 3.
inline constexpr int kDistributedManifestVersion = 4;

struct PartInfo {
  Slab slab;                        // global planes the rank owns
  HaloExtent halo;                  // planes held below and above the slab
  std::string dir;                  // the part, an ordinary grid of below + slab + above planes
  std::vector<std::string> stores;  // its data directories; empty: the part's directory

  int64_t planes() const { return halo.below + slab.planes() + halo.above; }
  // Global plane of part plane p (outside [0, nz) in a periodic halo).
  int64_t global_plane(int64_t p) const { return slab.z0 - halo.below + p; }
};

struct DistributedManifest {
  int version = kDistributedManifestVersion;
  std::string id;
  Shape shape;
  DType dtype = DType::kF32;
  int64_t step = 0;
  std::vector<PartInfo> parts;  // one per rank, in rank order; the slabs tile [0, nz)
  std::vector<HistoryEntry> history;

  int ranks() const { return static_cast<int>(parts.size()); }
  std::vector<Slab> slabs() const;
  std::string to_json() const;
  // Parses and checks the decomposition's consistency (not the parts).
  static Result<DistributedManifest> from_json(std::string_view text);
};

// Whether DIR's manifest is a distributed grid's (false for serial grids and non-grids).
bool is_distributed_grid(const std::string& dir);
Result<DistributedManifest> read_distributed_manifest(const std::string& dir);
// Atomically replaces DIR/manifest.json.
Status write_distributed_manifest(const std::string& dir, const DistributedManifest& m);

// Where rank r keeps its part: in its first store directory when it has any (node-local
// disks), else in DIR.
std::string part_directory(const std::string& dir, const std::string& id, int rank,
                           const std::vector<std::string>& stores);

// Opens rank r's part and checks it against the manifest (shape, dtype, time step, an
// interrupted sweep).
Result<Grid> open_part(const DistributedManifest& m, int rank, Grid::Mode mode);

// The slab planes of rank r's part in global order, each handed to `consume` with its global z.
Status read_slab_planes(const Grid& part, const PartInfo& info, const io::PlaneConsumer& consume);

// One plane copied from a rank's part into another's (or its own) halo.
struct PlaneTransfer {
  int from_rank = 0;
  int64_t from_plane = 0;  // in the sender's part
  int to_rank = 0;
  int64_t to_plane = 0;  // in the receiver's part
  bool operator==(const PlaneTransfer&) const = default;
};

// Every transfer that fills the halos of every part with the current values of the planes
// they stand for (periodic: wrapped around, even several times for thin grids), in one order
// that every rank computes alike: by receiver, then by its part's plane.
std::vector<PlaneTransfer> halo_transfers(const std::vector<PartInfo>& parts, int64_t nz,
                                          bool periodic);

// One line on rank r's part for `deepgrid info`: where it is, its planes, and whether it is
// consistent with the manifest (or what is wrong with it).
std::string describe_part(const DistributedManifest& m, int rank);

// Removes a part (its data files, wherever they are, and its directory); it must not be open.
Status remove_part(const std::string& part_dir);

// Every global plane in order, read from the parts one after the other (serial access).
Status read_distributed_planes(const DistributedManifest& m, bool verify,
                               const io::PlaneConsumer& consume);

}  // namespace deepgrid
