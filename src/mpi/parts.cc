// The parts of a distributed grid as the commands handle them: the options they are made
// with, every rank's view of its own shared, the manifest naming them written by rank 0, and
// parts left prepared by a run stopped in its commit settled.
#include "mpi/parts.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <random>

#include "mpi/comm.h"

namespace deepgrid::mpi {

using nlohmann::json;

namespace {

json part_json(const PartInfo& p) {
  return {{"dir", p.dir}, {"stores", p.stores}, {"below", p.halo.below}, {"above", p.halo.above}};
}

}  // namespace

namespace detail {

std::string new_id() {
  std::random_device rd;
  char buf[17];
  std::snprintf(buf, sizeof buf, "%08x%08x", rd(), rd());
  return buf;
}

Status commit_with_history(Grid& grid, int64_t step, const std::string& command,
                           const json& details) {
  Manifest m = grid.manifest();
  m.step = step;
  if (!command.empty()) m.history.push_back({utc_now(), command, details.dump()});
  return grid.commit(m);
}

CreateOptions part_options(const CreateOptions& global, const PartInfo& info) {
  CreateOptions opt;
  opt.shape = info.shape();
  opt.dtype = global.dtype;
  for (const FieldInit& f : global.fields) opt.fields.push_back({f.name, {}});
  opt.scheme = global.scheme;
  opt.coefficient_components = global.coefficient_components;
  opt.stores = info.stores;
  return opt;
}

CreateOptions grid_options(const Manifest& m) {
  CreateOptions opt;
  opt.shape = m.shape;
  opt.dtype = m.dtype;
  for (const std::string& f : m.fields) opt.fields.push_back({f, {}});
  opt.scheme = m.scheme;
  opt.coefficient_components = m.scheme_coef_components();
  return opt;
}

void share_parts(DistributedManifest* m, const PartInfo& mine) {
  const std::vector<std::string> all = all_gather(part_json(mine).dump());
  for (size_t r = 0; r < all.size(); ++r) {
    const json j = json::parse(all[r]);
    PartInfo& p = m->parts[r];
    p.dir = j.at("dir").get<std::string>();
    p.stores = j.at("stores").get<std::vector<std::string>>();
    p.halo = {j.at("below").get<std::array<int64_t, 3>>(),
              j.at("above").get<std::array<int64_t, 3>>()};
  }
}

internal::PlaneFormat global_format(const DistributedManifest& m) {
  return internal::plane_format(m.shape, m.dtype, m.components());
}

Status write_on_root(const std::string& dir, const DistributedManifest& m) {
  return agree(rank() == 0 ? write_distributed_manifest(dir, m) : Status::Ok());
}

Result<ProcessGrid> process_grid_for(const Shape& shape, const std::optional<ProcessGrid>& given) {
  if (!given) return choose_process_grid(shape, size());
  DG_RETURN_IF_ERROR(check_process_grid(*given, shape, size()));
  return *given;
}

Result<std::optional<internal::GridLock>> lock_on_root(const std::string& dir) {
  std::optional<internal::GridLock> lock;
  Status locked;
  if (rank() == 0) {
    auto held = internal::GridLock::acquire(dir, internal::GridLock::Kind::kExclusive);
    locked = held.status();
    if (held.ok()) lock.emplace(std::move(held).value());
  }
  DG_RETURN_IF_ERROR(agree(locked));
  return lock;
}

Status settle_prepared(const DistributedManifest& m) {
  if (size() != m.ranks()) return Status::Ok();
  auto part = open_part_as_is(m, rank(), Grid::Mode::kReadWrite);
  DG_RETURN_IF_ERROR(agree(part.status()));
  const int64_t prepared = part->prepared() ? part->prepared()->step : -1;
  int64_t t = -1;
  bool forward = true;
  std::vector<std::array<int64_t, 2>> all;
  for (const std::string& text : all_gather(json({part->manifest().step, prepared}).dump())) {
    all.push_back(json::parse(text).get<std::array<int64_t, 2>>());
    t = std::max(t, all.back()[1]);
  }
  if (t < 0) return Status::Ok();
  for (const auto& [step, ready] : all) forward = forward && (ready == t || step == t);
  Status st;
  if (prepared >= 0) st = forward ? part->commit_prepared() : part->discard_prepared();
  return agree(st);
}

}  // namespace detail

Result<DistributedManifest> load_distributed(const std::string& dir) {
  std::string text;
  Status st;
  if (rank() == 0) {
    auto m = read_distributed_manifest(dir);  // checks it, with a message naming the file
    st = m.status();
    if (m.ok()) text = m->to_json();
  }
  DG_RETURN_IF_ERROR(agree(st));
  return distributed_manifest_in(broadcast(text), dir);
}

}  // namespace deepgrid::mpi
