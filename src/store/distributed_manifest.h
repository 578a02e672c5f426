// A distributed grid: one grid split into blocks over the ranks of an MPI job (a process grid,
// decomposition.h), each rank's part an ordinary grid (its own manifest, data files on its own
// store directories, checksums) holding its block and the halos around it. A top-level manifest in
// DIR records the decomposition. This header needs no MPI: a serial process reads a distributed
// grid through its parts when their directories are reachable (one machine, or a shared
// filesystem).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/aligned_buffer.h"
#include "core/decomposition.h"
#include "deepgrid/plane_transfer.h"
#include "deepgrid/probes.h"
#include "deepgrid/store.h"

namespace deepgrid {

// Version 4 of the format introduced distributed grids (z-slabs); version 5 records a process
// grid and every rank's block (version 4 manifests still open, as px = py = 1); version 6 adds
// fields (a plane of several components, as serial grids of version 4), and grids of one field
// are still written as version 5.
inline constexpr int kDistributedManifestVersion = 6;
inline constexpr int kOneFieldDistributedManifestVersion = 5;

struct PartInfo {
  Block block;                      // global points the rank owns
  HaloExtent halo;                  // points held beyond the block on each side of each axis
  std::string dir;                  // the part, an ordinary grid of its block and halos
  std::vector<std::string> stores;  // its data directories; empty: the part's directory

  Shape shape() const;
  // Global index of the part's first point along axis a (below 0 in a periodic halo).
  int64_t origin(int a) const { return block[a].lo - halo.below[static_cast<size_t>(a)]; }
  // The points it holds, in global coordinates (beyond the grid in a periodic halo).
  Block held() const;
  // A block in global coordinates moved into the part's coordinates.
  Block to_local(const Block& global) const;
};

struct DistributedManifest {
  int version = kDistributedManifestVersion;
  std::string id;
  Shape shape;
  DType dtype = DType::kF32;
  int64_t step = 0;
  // The components of a plane and the scheme the grid was made for, as a serial grid's
  // (Manifest::fields, Manifest::scheme); every part has the same.
  std::vector<std::string> fields;
  std::string scheme;
  ProcessGrid procs;
  std::vector<PartInfo> parts;  // one per rank, in rank order: decompose(shape, procs)
  std::vector<HistoryEntry> history;
  std::string dir;  // where the manifest was read from or written to (not stored in it)

  int ranks() const { return static_cast<int>(parts.size()); }
  int components() const { return fields.empty() ? 1 : static_cast<int>(fields.size()); }
  // The whole grid described as a serial grid's manifest (id, shape, dtype, step, fields,
  // scheme; no layout, no history): for the checks and choices that serial grids make.
  Manifest as_grid() const;
  std::string to_json() const;
  // Parses and checks the decomposition's consistency (not the parts) and that every part is
  // where deepgrid puts it (docs/security.md); a part without stores is then named by its
  // directory's name alone, to be found beside the manifest (distributed_manifest_in).
  static Result<DistributedManifest> from_json(std::string_view text);
};

// The manifest `text` of the distributed grid in `dir`: from_json, with `dir` recorded and the
// parts without stores found in it.
Result<DistributedManifest> distributed_manifest_in(std::string_view text, const std::string& dir);

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
// The same without the time step: a part of a run that stopped part-way, as it is.
Result<Grid> open_part_as_is(const DistributedManifest& m, int rank, Grid::Mode mode);

// The values of `rect`'s x-y rectangle (its z span is ignored) of the part's plane p, packed
// row after row (x fastest), one component after another, into `packed`; `plane` is scratch
// space for one plane of the part.
Status read_rect(const Grid& part, int64_t p, const Block& rect, internal::ScratchPages* plane,
                 std::byte* packed);

// Every global plane z of the block, its values in `packed` (the block's x-y rectangle, as
// read_rect packs it), handed to `consume`.
using RectConsumer = std::function<Status(int64_t z, const std::byte* packed)>;
Status read_block_planes(const Grid& part, const PartInfo& info, const RectConsumer& consume);

// A box of values copied from a rank's part into another's (or its own) halo; both boxes are in
// their part's coordinates and have the same size.
struct BoxTransfer {
  int from_rank = 0;
  Block from;
  int to_rank = 0;
  Block to;
  bool operator==(const BoxTransfer&) const = default;
};

// Every transfer that fills the halos of every part (faces, edges and corners) with the current
// values of the points they stand for (periodic: wrapped around on every axis, even several
// times for thin grids), in one order that every rank computes alike: by receiver, then by the
// halo's region (z, y, x), then by sender.
std::vector<BoxTransfer> halo_transfers(const std::vector<PartInfo>& parts, const Shape& shape,
                                        bool periodic);

// The share of a run's probes (resolved on the whole grid) that a part applies, in the part's
// coordinates: each source at every point the part holds that stands for the source's point
// (in its halos too, and with periodic wrap every copy, as the serial engines' tiles do), and
// the receivers in its block only, each recording once; `receiver_index` gets each of the
// part's receivers' index among `global`'s. Its traces pointer is null.
ResolvedProbes part_probes(const ResolvedProbes& global, const PartInfo& part, const Shape& shape,
                           bool periodic, std::vector<int64_t>* receiver_index);

// One line on rank r's part for `deepgrid info`: where it is, its planes, and whether it is
// consistent with the manifest (or what is wrong with it).
std::string describe_part(const DistributedManifest& m, int rank);

// Removes a part (its data files, wherever they are, and its directory); it must not be open.
Status remove_part(const std::string& part_dir);

// Every global plane in order, read from the parts one after the other (serial access).
Status read_distributed_planes(const DistributedManifest& m, bool verify,
                               const io::PlaneConsumer& consume);

}  // namespace deepgrid
