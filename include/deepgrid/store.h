// The on-disk grid: a directory with a JSON manifest and data files laid out for direct I/O.
//
// Layout: the data files hold a ring of nz + spare_planes plane slots; plane z (nx * ny values,
// x fastest, of each component in turn) is in slot (z + base) mod slots. A slot occupies
// `plane_stride` bytes, the bytes of the components it holds rounded up to 4096. Slots are
// grouped into chunks of `planes_per_chunk`; chunk c lives in file c % S (S = number of store
// directories) at byte offset (c / S) * chunk_bytes. Values are little-endian IEEE. The spare
// slots let an in-place sweep write new plane z into the slot `spare` places behind old plane
// z's, so the old planes a crashed sweep still needs are intact (resume.h); each sweep moves
// `base` back by `spare`.
//
// Coefficient files (format version 5): a grid whose scheme's coefficient fields (read-only,
// constant in time) are the last components of its planes keeps those components apart, in
// coefficient files striped like the ring: plane z's coefficients at a fixed place (chunk z /
// coef_planes_per_chunk in coefficient file chunk % S), never moved by a sweep. The ring's
// slots then hold the state components only, so a sweep reads a plane's every component and
// writes its state alone; in memory a plane is still every component one after another (the
// ring's part, then the coefficients'). A plane's coefficients take a record of `coef_stride()`
// bytes: `coef_lead()` bytes of padding, so that every byte lies at the same place in a 4096-byte
// block as it would in the ring (one alignment serves both files), the coefficients, and
// padding to the block's end. Version 6: the same where the components are not whole 4096-byte
// blocks (version 5 had coefficient files only where they were: no padding).
// Coefficient files are written when a grid is made (and by writers of whole planes, with the
// values they hold: engines never change coefficients) and have no second copy.
//
// The manifest (DIR/manifest.json) is replaced atomically: written to a temporary file,
// fsynced, renamed over the old one, and the directory fsynced. Beside it, a checksum table
// (integrity.h) holds the hash of every plane; the manifest names the table's generation, so
// replacing the manifest commits both at once.
//
// Access: a Grid holds the grid's lock (DIR/deepgrid.lock, flock(2)) for its lifetime; read-only
// Grids share it, a read-write Grid holds it alone. Opening a grid another process holds in a
// conflicting way fails at once with ErrorCode::kBusy, naming the holder's process id.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "deepgrid/direct_io.h"
#include "deepgrid/dtype.h"
#include "deepgrid/geometry.h"
#include "deepgrid/init.h"
#include "deepgrid/integrity.h"
#include "deepgrid/resume.h"
#include "deepgrid/scheme.h"
#include "deepgrid/status.h"

namespace deepgrid {

namespace internal {
class GridLock;
}

// Version 2 added the checksum table; version-1 grids are read and get one when next written.
// Version 3 added the spare slots and the base; older grids have neither (0 and 0).
// Version 4 added fields: a plane of several components (a scheme's fields, scheme.h); grids of
// one field are still written as version 3.
// Version 5 added coefficient files (above); grids without them are still written as version 4.
// Version 6 added coefficient records with padding (above); grids without it are still written as
// version 5.
inline constexpr int kManifestVersion = 6;
inline constexpr int kAlignedCoefManifestVersion = 5;
inline constexpr int kFieldsManifestVersion = 4;
inline constexpr int kOneFieldManifestVersion = 3;

struct DataFile {
  // data.<f>.dgd in the grid directory, or <store f>/deepgrid-<id>.<f>.dgd (and the
  // replacement names .b.dgd): a manifest naming anything else is refused (docs/security.md)
  std::string path;
  int64_t bytes = 0;
};

struct Layout {
  int64_t plane_bytes = 0;   // components * nx * ny * dtype size: a plane in memory
  int64_t plane_stride = 0;  // a ring slot: ring_bytes() rounded up to kDirectIoAlignment
  int64_t planes_per_chunk = 0;
  int64_t spare_planes = 0;     // slots beyond the nz the planes occupy
  std::vector<DataFile> files;  // one per store directory
  // Coefficient files (version 5): the bytes of a plane's coefficient components kept apart
  // (0: none, every component is in the ring), and their files, one per store.
  int64_t coef_bytes = 0;
  int64_t coef_planes_per_chunk = 0;
  std::vector<DataFile> coef_files;

  int64_t chunk_bytes() const { return planes_per_chunk * plane_stride; }
  int64_t coef_chunk_bytes() const { return coef_planes_per_chunk * coef_stride(); }
  // The bytes of a plane the ring's slots hold.
  int64_t ring_bytes() const { return plane_bytes - coef_bytes; }
  // A plane's coefficient record: the padding before its coefficients (where the ring's part
  // ends in its last block), and the record's bytes, whole blocks (version 6; version 5's
  // records have no padding).
  int64_t coef_lead() const { return coef_bytes > 0 ? ring_bytes() % kDirectIoAlignment : 0; }
  int64_t coef_stride() const {
    return (coef_lead() + coef_bytes + kDirectIoAlignment - 1) / kDirectIoAlignment *
           kDirectIoAlignment;
  }
  // An aligned buffer that takes a whole plane in one transfer of each of its parts: the
  // ring's slot, then the coefficients' record from byte plane_stride on. The coefficients
  // then start at byte coef_at(), right after the ring's part where its bytes are whole blocks;
  // where they are not, the transfers move them there (internal::coefficients_to_plane).
  int64_t plane_buffer_bytes() const { return plane_stride + coef_stride(); }
  int64_t coef_at() const { return plane_stride + coef_lead(); }
  // The bytes of the data and coefficient files together.
  int64_t disk_bytes() const {
    int64_t total = 0;
    for (const DataFile& f : files) total += f.bytes;
    for (const DataFile& f : coef_files) total += f.bytes;
    return total;
  }
};

// Where plane z is: file index and byte offset.
struct PlaneLocation {
  int file = 0;
  int64_t offset = 0;
};

// One entry of a grid's history (create, run, import).
struct HistoryEntry {
  std::string date;     // ISO 8601 UTC
  std::string command;  // "create", "run", "import"
  std::string details;  // JSON object text with the command's parameters and results
};

struct Manifest {
  int version = kManifestVersion;
  std::string id;
  Shape shape;
  DType dtype = DType::kF32;
  Layout layout;
  int64_t step = 0;
  int64_t base = 0;                 // plane z is in slot (z + base) mod slots(); in [0, slots())
  int64_t checksum_generation = 0;  // names the checksum table; 0: none recorded (version 1)
  // Planes of several components hashed component by component ("xxh3-64-fields",
  // integrity.h): new grids; false for grids of fields written before 2026-11-30.
  bool checksums_by_component = true;
  // The store directories the grid was created with (absolute, normal), one per data file;
  // empty when the data are in the grid directory. Only 'deepgrid relocate' changes them.
  std::vector<std::string> stores;
  // The components of a plane, in order (scheme.h): empty for a grid of one field. A plane
  // holds nx * ny values of each component, one component after another.
  std::vector<std::string> fields;
  std::string scheme;  // the scheme a grid of fields was made for (its JSON); empty for none
  std::vector<HistoryEntry> history;

  int components() const { return fields.empty() ? 1 : static_cast<int>(fields.size()); }
  // The components' names: `fields`, or {"u"} for a grid of one field.
  std::vector<std::string> field_names() const {
    return fields.empty() ? std::vector<std::string>{"u"} : fields;
  }
  // The index of component `name` ("u" names the only one of a plain grid), or -1.
  int component_index(std::string_view name) const;
  int64_t slots() const { return shape.nz + layout.spare_planes; }
  // How the planes' checksums are made, and that algorithm's name.
  PlaneHashing plane_hashing() const;
  std::string_view checksum_algorithm() const;
  PlaneLocation locate(int64_t z) const { return locate_slot(slot_of(z, base)); }
  // Where plane z's coefficients are (in layout.coef_files): grids with coefficient files.
  PlaneLocation locate_coef(int64_t z) const;
  bool has_coef_files() const { return layout.coef_bytes > 0; }
  // The bytes a read of every plane moves, and a write of a whole new state (in-core runs,
  // replacements: without the coefficients, which stay in their files).
  int64_t grid_read_bytes() const { return shape.nz * layout.plane_buffer_bytes(); }
  int64_t grid_write_bytes() const { return shape.nz * layout.plane_stride; }
  // The last components kept in the coefficient files (0 without them).
  int coef_components() const {
    return static_cast<int>(layout.coef_bytes / (layout.plane_bytes / components()));
  }
  // The last components that the recorded scheme reads as coefficient fields, wherever they
  // are kept (coefficient_components): 0 without a scheme, or with one that does not parse.
  int scheme_coef_components() const;
  // The slot of plane z with another base (a sweep's writes go `spare` slots back).
  int64_t slot_of(int64_t z, int64_t with_base) const;
  PlaneLocation locate_slot(int64_t slot) const;
  std::string to_json() const;
  // Parses and checks the manifest's own consistency (not the data files).
  static Result<Manifest> from_json(std::string_view text);
};

struct CreateOptions {
  Shape shape;
  DType dtype = DType::kF32;
  InitSpec init;                    // a grid of one field
  std::vector<FieldInit> fields;    // a grid of several components (then `init` is unused)
  std::string scheme;               // recorded in the manifest (Manifest::scheme)
  std::vector<std::string> stores;  // data directories; empty = the grid directory itself
  int64_t chunk_target_bytes = 8 << 20;
  int64_t spare_planes = -1;  // -1: default_spare_planes(nz)
  // The last components that are coefficient fields (create_for_scheme), kept in coefficient
  // files where the shape allows (plan_layout).
  int coefficient_components = 0;
};

// Spare slots a new grid gets: enough for in-place sweeps of up to 63 steps of a radius-1
// stencil without growing the files, and 1/16 of the grid for large ones (deep sweeps of
// large planes then rarely wait for a checkpoint).
int64_t default_spare_planes(int64_t nz);

// The layout create() would use, and the bytes each store directory needs. The last
// `coefficient_components` go to coefficient files when every component of a plane is whole
// 4096-byte blocks; else they stay in the ring like the others.
Result<Layout> plan_layout(const Shape& shape, DType dtype, size_t n_stores,
                           int64_t chunk_target_bytes, int64_t spare_planes, int components = 1,
                           int coefficient_components = 0);

// The manifest create() would write, but for its id, the data files' paths and its history:
// what planning a run on a grid not yet made needs.
Result<Manifest> manifest_for(const CreateOptions& options);

// The grid's data files, or the replacement a writer of a whole new state fills (below).
enum class FileSet { kCurrent, kReplacement };

// What Grid::upgrade did: the grid's format version before and after, the coefficient fields
// it moved out of the ring into coefficient files, and whether it recorded the checksums
// component by component.
struct Upgrade {
  int from_version = 0;
  int to_version = 0;
  std::vector<std::string> coefficient_files;
  bool checksums_by_component = false;
};

class Grid {
 public:
  enum class Mode { kReadOnly, kReadWrite };

  // Creates DIR (which must not exist, or be an empty directory) and its data files, filled
  // with the initial condition. Checks free space before writing anything; on failure removes
  // what it created. The Grid returned is read-write and holds the grid alone.
  static Result<Grid> create(const std::string& dir, const CreateOptions& options);
  // Opens an existing grid, checking the manifest and the data files' sizes. kReadOnly shares
  // the grid with other readers; kReadWrite holds it alone (kBusy when another process holds it).
  static Result<Grid> open(const std::string& dir, Mode mode = Mode::kReadOnly);

  Grid(Grid&&) noexcept;
  Grid& operator=(Grid&&) noexcept;
  ~Grid();

  const Manifest& manifest() const { return manifest_; }
  const std::string& dir() const { return dir_; }
  const Shape& shape() const { return manifest_.shape; }
  DType dtype() const { return manifest_.dtype; }
  // Whether the data files were opened with O_DIRECT (false on filesystems refusing it).
  bool direct_io() const { return direct_io_; }
  // Where plane z is in a set of data files, and the set's files (for direct block I/O).
  PlaneLocation locate(int64_t z, FileSet set = FileSet::kCurrent) const;
  std::string file_path(int file, FileSet set = FileSet::kCurrent) const;
  int fd(int file, FileSet set = FileSet::kCurrent) const {
    return (set == FileSet::kCurrent ? fds_ : replacement_fds_)[static_cast<size_t>(file)];
  }
  // The coefficient files (grids with them: Manifest::has_coef_files, locate_coef). No set:
  // a replacement of the grid's state shares them.
  const std::string& coef_path(int file) const { return coef_paths_[static_cast<size_t>(file)]; }
  int coef_fd(int file) const { return coef_fds_[static_cast<size_t>(file)]; }

  // Reads planes [z0, z0 + count) into `dst`, packed (count * nx * ny values, no padding).
  // Where `dst` (`src` below) is aligned to kDirectIoAlignment and a plane is whole 4096-byte
  // blocks, the data goes straight between the files and it; else through a bounce buffer of
  // up to a chunk's planes, allocated per call.
  Status read_planes(int64_t z0, int64_t count, void* dst) const;
  // Writes packed planes [z0, z0 + count) from `src`, recording their hashes.
  Status write_planes(int64_t z0, int64_t count, const void* src);

  // From now on every plane read (read_planes, and the stream engine's reads) is compared with
  // its recorded hash; a mismatch fails with kCorrupt naming the file and offset. Fails when
  // the grid has no complete checksum table.
  Status enable_verification();
  // The same when the grid has a sound, complete checksum table, else nothing (a grid written
  // before format version 2, or whose table is damaged): for copies that replace the grid's
  // files, whose new checksums would otherwise hide damage in what they copied.
  void verify_if_recorded();
  // For writers with their own I/O (the stream engine): plane z is about to be written with the
  // plane_bytes of values at `values`. The hash is committed by the next commit().
  void record_plane(int64_t z, const void* values);
  // The same with the hash already computed (plane_hash of its plane_bytes), e.g. in parallel.
  void record_plane_hash(int64_t z, uint64_t hash);
  // For readers with their own I/O: checks plane z's values when verification is on.
  Status verify_plane(int64_t z, const void* values) const;
  // The same for a reader that hashed the values itself (PlaneHasher) when verifying().
  bool verifying() const { return verify_; }
  Status verify_plane_hash(int64_t z, uint64_t hash) const;
  // The same whether or not verification is on (kCorrupt naming the file and offset).
  Status check_plane_hash(int64_t z, uint64_t hash) const;
  // For writers that cannot hash whole planes as they write (tiled's blocks): the hashes are
  // unknown again until recorded, so a commit before then writes no table.
  void forget_checksums() { checksums_ = PlaneChecksums(manifest_.shape.nz); }
  // The recorded hashes (complete() when the table was loaded or every plane was written).
  const PlaneChecksums& checksums() const { return checksums_; }
  // Why the grid's checksum table could not be loaded; empty when it was, or when it has none.
  const std::string& checksum_problem() const { return checksum_problem_; }

  // In-place sweeps (resume.h). save_sweep makes the record durable, after the data files
  // when record.done > 0 (the planes it claims must be on disk first); it may be called from
  // another thread while the engine's I/O runs. The next commit() removes it.
  Status save_sweep(const SweepRecord& record) const;
  // The record of a sweep that began from the manifest's step and never committed (the data
  // files then mix two time steps); empty when the data files hold the manifest's step.
  const std::optional<SweepRecord>& sweep_record() const { return sweep_record_; }
  // The same in words for people, e.g. "sweep from step 12 over 8 steps started
  // 2026-11-22T20:25:30Z, 1200 of 4096 planes done"; empty when there is none.
  const std::string& interrupted_sweep() const { return interrupted_sweep_; }

  // Gives the ring at least `planes` spare slots by lengthening the data files, which keeps
  // every plane where it is only while the planes do not wrap around the ring's end
  // (can_grow_spare()). Commits the manifest.
  bool can_grow_spare() const;
  Status grow_spare(int64_t planes);
  // Adds `below` planes of zeros before plane 0 and `above` after the last (old plane z
  // becomes plane z + below) without moving a plane: the ring gains that many slots (the data
  // files grow) and the new planes take the free slots beside the old ones. Only while the
  // planes do not wrap around the ring's end (can_grow_spare()) and no in-place sweep or
  // prepared replacement is pending; the spare slots stay as many. The checksums move with
  // their planes. Commits the manifest.
  // Grids with coefficient files cannot (can_add_planes).
  Status add_planes(int64_t below, int64_t above);
  bool can_add_planes() const;

  // Writers that produce a whole new state (the in-core engines) write it into a second set of
  // data files, so a crash leaves the committed files untouched: create_replacement() makes
  // them (laid out with base 0), write_plane_range(..., FileSet::kReplacement) fills them, and
  // commit_replacement() makes them the grid's files atomically with the manifest `m` and
  // removes the old ones. A crash's leftovers are removed when the grid is next opened to write.
  // A writer that commits one state after another (a sweep per commit) keeps the old files
  // instead (kKeep): the next create_replacement() then writes into them, which spares freeing
  // and allocating a grid's worth of disk blocks per commit (removing a 4 GiB file took 0.65 s
  // on the development VM). Kept files hold stale values until overwritten and are removed by
  // discard_prepared(), a commit that removes, or the Grid's end.
  enum class OldFiles { kRemove, kKeep };
  Status create_replacement();
  Status commit_replacement(Manifest m, OldFiles old = OldFiles::kRemove);

  // A replacement made ready beside the grid's files without committing it, for writers that
  // must commit several grids at once (a distributed run's parts): prepare_replacement(m) makes
  // the filled replacement files and the manifest `m` naming them durable
  // (DIR/prepared.json); commit_prepared() then makes them the grid's files as
  // commit_replacement does, and discard_prepared() removes them. A prepared replacement
  // outlives the Grid: open() finds it (prepared()) and leaves its files alone until one of
  // the two is called; create_replacement() discards it.
  Status prepare_replacement(Manifest m);
  const std::optional<Manifest>& prepared() const { return prepared_; }
  Status commit_prepared();
  Status discard_prepared();

  // Atomically replaces the manifest with `m` (same layout), fsyncing data files first, and
  // with it the checksum table when every plane's hash is known (else the grid has none).
  Status commit(const Manifest& m);

  // Brings a grid made by an earlier deepgrid to what this one writes (Upgrade): a scheme's
  // coefficient fields kept in the ring (grids made before format version 5, or before version
  // 6 on planes whose components are not whole 4096-byte blocks) move to coefficient files,
  // which later sweeps read and never write, and the checksums of planes of several fields are
  // recorded component by component. Moving the coefficients copies every plane into new data
  // and coefficient files (room for the grid's files again, checked first; about 192 MiB of
  // planes in memory, three planes where one is larger than 64 MiB), each checked against its
  // checksum on the way, then commits the manifest naming them and removes the old files; the
  // checksums alone are hashed again in place. Nothing to do leaves the grid as it is
  // (to_version == from_version). Needs the grid opened read-write; refused while an in-place
  // sweep or a prepared commit is unfinished, and where the checksum table is damaged
  // (kCorrupt: new checksums would vouch for unchecked values); on failure the grid is as it
  // was.
  Result<Upgrade> upgrade();

  uint64_t bytes_read() const { return bytes_read_; }
  uint64_t bytes_written() const { return bytes_written_; }

 private:
  Grid() = default;
  Status open_files(Mode mode);
  // Lengthens the data files to the slots of `m` (its shape and spare planes; the slots
  // already there stay where they are) and sets its layout to match.
  Status lengthen_files(Manifest* m);
  template <typename Visit>
  Status transfer_planes(int64_t z0, int64_t count, bool write, std::byte* values,
                         Visit visit) const;

  Status load_checksums();
  void load_sweep_record();
  // The replacement files a crash left, and the coefficient files of an upgrade that did not
  // commit.
  void remove_replacement_leftovers() const;
  // Whether the kept files are as many and as long as the layout's (a grown grid's are not).
  bool kept_files_fit() const;
  // Closes the kept files and removes them (their names are the replacement's).
  void remove_kept_files();
  void load_prepared();
  Status sync_replacement() const;
  // `m` as a commit writes it: its format version, and a new checksum table (written here)
  // when every plane's hash is known.
  Result<Manifest> manifest_to_commit(const Manifest& m) const;
  // What follows the manifest `next` replacing manifest_ on disk.
  Status committed(Manifest next);
  std::string checksum_path(int64_t generation) const;

  std::unique_ptr<internal::GridLock> lock_;  // first member: released last
  std::string dir_;
  Manifest manifest_;
  PlaneChecksums checksums_;
  std::string checksum_problem_;
  std::optional<SweepRecord> sweep_record_;
  std::optional<Manifest> prepared_;
  std::string interrupted_sweep_;
  bool verify_ = false;
  std::vector<int> fds_;
  std::vector<int> replacement_fds_;
  std::vector<int> kept_fds_;  // files a commit kept for the next replacement (OldFiles::kKeep)
  std::vector<int> coef_fds_;
  std::vector<std::string> coef_paths_;
  bool direct_io_ = false;
  mutable uint64_t bytes_read_ = 0;
  uint64_t bytes_written_ = 0;
};

// What relocate_grid did with each data file: copied to its new store, or found there already
// (copied by the user, e.g. with the disks); and whether the files were compared with the
// grid's checksums.
struct Relocation {
  int copied = 0;
  int found = 0;
  bool checked = false;
};

// Moves a grid's data files to new store directories, one per data file (as many as the grid
// has): each is copied there, or taken where a copy is there already; their sizes and, when
// the grid has checksums, every plane are checked; then the manifest records the new stores and
// the old files are removed. The one way a grid's stores change (a manifest naming files
// elsewhere is refused, docs/security.md); a grid whose data are in its own directory moves
// with it. Refused while an in-place sweep or a prepared commit is unfinished; on failure the
// grid is as it was.
Result<Relocation> relocate_grid(const std::string& dir, const std::vector<std::string>& stores);

// Current time as ISO 8601 UTC ("2026-11-22T20:25:30Z").
std::string utc_now();

// Makes `options` create a grid of the scheme's fields (initial_fields from options.init) that
// records the scheme, so it runs without naming it again; refuses a dtype the scheme cannot
// run on. A plain stencil leaves the grid of one field.
Status create_for_scheme(const Scheme& scheme, CreateOptions& options);
// The scheme's last components that are coefficient fields (CreateOptions).
int coefficient_components(const Scheme& scheme);

}  // namespace deepgrid
