// The layout a run needs before its first round: the exchange depth and the halos it brings,
// each part given those halos (in place when only its z halos grow, else copied), and a grid
// split over another process grid than the run's split again. A part that is copied is
// checked as it is read, since the copy gets new checksums.
#include <mpi.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "core/file_util.h"
#include "mpi/comm.h"
#include "mpi/parts.h"

namespace deepgrid::mpi {

using nlohmann::json;
using namespace detail;

namespace {

// Reach of the stencil along each axis (x, y, z).
std::array<int64_t, 3> radii(const Scheme& scheme) {
  return {scheme.radius_x(), scheme.radius_y(), scheme.radius_z()};
}

}  // namespace

int detail::exchange_depth(const DistributedManifest& m, const RunOptions& opt) {
  if (opt.bt > 0) return opt.bt;
  const std::array<int64_t, 3> r = radii(opt.scheme);
  const bool any_split = m.procs.ranks() > 1;
  int64_t depth = 64;
  bool reaches = false;
  for (int a = 0; a < 3; ++a) {
    const size_t i = static_cast<size_t>(a);
    if (r[i] == 0 || (any_split && m.procs.p[i] == 1)) continue;
    int64_t thinnest = INT64_MAX;
    for (const PartInfo& p : m.parts) thinnest = std::min(thinnest, p.block.size(a));
    depth = std::min(depth, thinnest / (8 * r[i]));
    reaches = true;
  }
  if (!reaches) return static_cast<int>(std::clamp<int64_t>(opt.steps, 1, 64));
  return static_cast<int>(std::max<int64_t>(depth, 1));
}

namespace {

// A part about to be copied (laid out again, or split over another process grid) is checked
// against its checksums as it is read, since the copy gets new ones: always when it has them,
// and with `verify` (--verify) a part without them is refused.
Status check_what_is_copied(Grid& part, bool verify) {
  if (verify) return part.enable_verification();
  part.verify_if_recorded();
  return Status::Ok();
}

// Whether halo `to` differs from `from` only in wider z halos: planes the part can gain at its
// ends in place (Grid::add_planes), its block staying where it is on disk.
bool only_z_halos_grow(const HaloExtent& from, const HaloExtent& to) {
  for (size_t a : {size_t{kAxisX}, size_t{kAxisY}}) {
    if (to.below[a] != from.below[a] || to.above[a] != from.above[a]) return false;
  }
  constexpr size_t z = kAxisZ;
  return to.below[z] >= from.below[z] && to.above[z] >= from.above[z];
}

// Gives this rank's part the wider z halo `need` by adding planes at its ends, when its
// planes can stay where they are (Grid::can_add_planes); false when it must be copied instead.
// Nothing is copied, so nothing is checked: the block keeps its checksums.
Result<bool> add_halo_planes(const DistributedManifest& m, PartInfo* info, const HaloExtent& need) {
  if (!only_z_halos_grow(info->halo, need)) return false;
  DG_ASSIGN_OR_RETURN(Grid part, open_part(m, rank(), Grid::Mode::kReadWrite));
  if (!part.can_add_planes()) return false;
  constexpr size_t z = kAxisZ;
  DG_RETURN_IF_ERROR(
      part.add_planes(need.below[z] - info->halo.below[z], need.above[z] - info->halo.above[z]));
  DG_RETURN_IF_ERROR(commit_with_history(part, m.step, "relayout",
                                         {{"halo_below", need.below}, {"halo_above", need.above}}));
  info->halo = need;
  return true;
}

// Gives this rank's part the halo `need`: in place when only its z halos grow
// (add_halo_planes), else rewritten (its block's values copied and checked,
// check_what_is_copied) in place of the old one: a new part beside it, then the old one
// removed and the new one renamed over it.
Status relayout_part(const DistributedManifest& m, PartInfo* info, const HaloExtent& need,
                     bool verify) {
  const std::string fresh_dir = info->dir + ".new";
  if (internal::is_directory(fresh_dir)) {
    return corrupt(fresh_dir + " is left from an interrupted re-layout of part " +
                   std::to_string(rank()) + " (the part in " + info->dir +
                   " is intact); remove it and run again");
  }
  DG_ASSIGN_OR_RETURN(const bool added, add_halo_planes(m, info, need));
  if (added) return Status::Ok();
  PartInfo fresh_info = *info;
  fresh_info.halo = need;
  const CreateOptions opt = part_options(grid_options(m.as_grid()), fresh_info);
  const Status copied = [&]() -> Status {
    DG_ASSIGN_OR_RETURN(Grid fresh, Grid::create(fresh_dir, opt));
    DG_ASSIGN_OR_RETURN(Grid old, open_part(m, rank(), Grid::Mode::kReadOnly));
    DG_RETURN_IF_ERROR(check_what_is_copied(old, verify));
    const internal::PlaneFormat format = internal::plane_format(fresh.manifest());
    internal::AlignedBuffer plane(format.bytes());  // (written without a bounce buffer)
    if (!plane.ok()) return Status(ErrorCode::kResource, "out of memory for a plane");
    const Block at = fresh_info.to_local(info->block);
    DG_RETURN_IF_ERROR(read_block_planes(old, *info, [&](int64_t z, const std::byte* values) {
      // copy_rect only reads the packed values in this direction.
      internal::copy_rect(plane.data(), format, at, const_cast<std::byte*>(values),
                          internal::RectCopy::kFromPacked);
      return fresh.write_planes(z - fresh_info.origin(kAxisZ), 1, plane.data());
    }));
    return commit_with_history(fresh, m.step, "relayout",
                               {{"halo_below", need.below}, {"halo_above", need.above}});
  }();
  if (!copied.ok()) {
    if (internal::is_directory(fresh_dir)) (void)remove_part(fresh_dir);
    return copied;
  }
  DG_RETURN_IF_ERROR(remove_part(info->dir));
  if (::rename(fresh_dir.c_str(), info->dir.c_str()) != 0) {
    return errno_status(errno, "rename", fresh_dir);
  }
  *info = fresh_info;
  return Status::Ok();
}

}  // namespace

std::array<int64_t, 3> detail::halo_of_depth(const Scheme& scheme, int k) {
  std::array<int64_t, 3> halo = radii(scheme);
  for (int64_t& h : halo) h *= k;
  return halo;
}

std::array<int64_t, 3> detail::exchanged_halo(const Scheme& scheme, int k,
                                              const ProcessGrid& procs) {
  std::array<int64_t, 3> halo = halo_of_depth(scheme, k);
  for (size_t a = 0; a < 3; ++a) {
    if (procs.p[a] == 1) halo[a] = 0;
  }
  return halo;
}

HaloExtent detail::fitted_halo(const PartInfo& p, const Shape& shape,
                               const std::array<int64_t, 3>& halo, bool periodic) {
  const HaloExtent need = needed_halo(p.block, shape, halo, periodic);
  if (halo_suffices(p.halo, need, p.block, shape, periodic)) return p.halo;
  HaloExtent widened = p.halo;
  constexpr size_t z = kAxisZ;
  widened.below[z] = std::max(widened.below[z], need.below[z]);
  widened.above[z] = std::max(widened.above[z], need.above[z]);
  return halo_suffices(widened, need, p.block, shape, periodic) ? widened : need;
}

Status detail::fit_halos(const std::string& dir, DistributedManifest* m,
                         const std::array<int64_t, 3>& halo, bool periodic, bool verify) {
  PartInfo mine = m->parts[static_cast<size_t>(rank())];
  const HaloExtent need = fitted_halo(mine, m->shape, halo, periodic);
  const Status laid_out =
      agree(need == mine.halo ? Status::Ok() : relayout_part(*m, &mine, need, verify));
  int changed = mine.halo == m->parts[static_cast<size_t>(rank())].halo ? 0 : 1;
  MPI_Allreduce(MPI_IN_PLACE, &changed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (changed != 0) {
    share_parts(m, mine);
    DG_RETURN_IF_ERROR(write_on_root(dir, *m));
  }
  return laid_out;
}

namespace {

// The block's values read from the parts of an older decomposition of the same grid: for each
// plane, the rectangle where the block meets each old block (checked, check_what_is_copied).
BlockSource old_parts(const DistributedManifest& old, bool verify) {
  BlockSource source;
  source.command = "redistribute";
  source.details = {{"from_ranks", old.ranks()}, {"from_process_grid", old.procs.to_string()}};
  source.step = old.step;
  source.fill = [&old, verify](Grid& part, const Block& block) -> Status {
    std::vector<int> from;
    std::vector<Grid> opened;
    for (int o = 0; o < old.ranks(); ++o) {
      if (intersect(block, old.parts[static_cast<size_t>(o)].block).empty()) continue;
      DG_ASSIGN_OR_RETURN(Grid g, open_part(old, o, Grid::Mode::kReadOnly));
      DG_RETURN_IF_ERROR(check_what_is_copied(g, verify));
      from.push_back(o);
      opened.push_back(std::move(g));
    }
    const internal::PlaneFormat format = global_format(old);
    // The block's packed values: a plane of the block's extents.
    const internal::PlaneFormat packed_block = {block.size(kAxisX), block.size(kAxisY),
                                                format.components, format.value_bytes};
    internal::ScratchPages plane;
    std::vector<std::byte> values;
    return write_block(part, block, [&](int64_t z, std::byte* out) -> Status {
      for (size_t i = 0; i < from.size(); ++i) {
        const PartInfo& info = old.parts[static_cast<size_t>(from[i])];
        const Block meet = intersect(block, info.block);
        if (z < meet[kAxisZ].lo || z >= meet[kAxisZ].hi) continue;
        values.resize(format.rect_bytes(meet));
        DG_RETURN_IF_ERROR(read_rect(opened[i], z - info.origin(kAxisZ), info.to_local(meet),
                                     &plane, values.data()));
        PartInfo in_block;  // the block's own coordinates: a part of the block alone
        in_block.block = block;
        internal::copy_rect(out, packed_block, in_block.to_local(meet), values.data(),
                            internal::RectCopy::kFromPacked);
      }
      return Status::Ok();
    });
  };
  return source;
}

}  // namespace

DistributedManifest detail::split_as(const DistributedManifest& m, const ProcessGrid& procs) {
  if (m.procs == procs) return m;
  const std::vector<Block> blocks = decompose(m.shape, procs);
  DistributedManifest next = m;
  next.procs = procs;
  next.parts.assign(blocks.size(), {});
  for (size_t r = 0; r < blocks.size(); ++r) next.parts[r].block = blocks[r];
  return next;
}

Result<ProcessGrid> detail::run_process_grid(const DistributedManifest& m,
                                             const std::optional<ProcessGrid>& given) {
  if (!given && m.ranks() == size()) return m.procs;
  return process_grid_for(m.shape, given);
}

Status detail::redistribute(const std::string& dir, DistributedManifest* m,
                            const ProcessGrid& procs, bool verify) {
  if (m->procs == procs) return Status::Ok();
  const DistributedManifest old = *m;
  DistributedManifest next = split_as(old, procs);
  next.id = broadcast(rank() == 0 ? new_id() : std::string());
  CreateOptions options = grid_options(old.as_grid());
  options.stores = old.parts[static_cast<size_t>(rank() % old.ranks())].stores;
  auto part = create_part(dir, next.id, options, old_parts(old, verify),
                          next.parts[static_cast<size_t>(rank())].block);
  Status st = agree(part.status());
  if (st.ok()) {
    share_parts(&next, *part);
    next.history.push_back({utc_now(), "redistribute",
                            json{{"from_ranks", old.ranks()},
                                 {"to_ranks", size()},
                                 {"from_process_grid", old.procs.to_string()},
                                 {"to_process_grid", procs.to_string()}}
                                .dump()});
    st = write_on_root(dir, next);
  }
  if (!st.ok()) {  // the old parts still hold the grid
    if (part.ok()) (void)remove_part(part->dir);
    return st;
  }
  *m = next;
  Status removed;
  for (int o = rank(); o < old.ranks(); o += size()) {
    const Status gone = remove_part(old.parts[static_cast<size_t>(o)].dir);
    if (removed.ok() && !gone.ok()) {
      removed = Status(gone.code(), "the grid was redistributed, but its old part " +
                                        std::to_string(o) + " could not be removed (" +
                                        gone.message() + "); remove it by hand");
    }
  }
  return agree(removed);
}

}  // namespace deepgrid::mpi
