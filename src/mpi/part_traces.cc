// The receivers' values of a distributed run: each part records its own receivers' in its
// part's coordinates, and after every round rank 0 gathers the round's steps into the run's
// traces file, as a serial run writes it after every pass.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/file_util.h"
#include "deepgrid/traces_file.h"
#include "mpi/comm.h"
#include "mpi/parts.h"

namespace deepgrid::mpi {

using namespace detail;

namespace {

constexpr const char* kPartTracesName = "traces.part.npy";

}  // namespace

std::string detail::part_traces_path(const Grid& part) {
  return internal::join_path(part.dir(), kPartTracesName);
}

PartProbes detail::part_share(const ResolvedProbes& all, const PartInfo& info,
                              const DistributedManifest& m, const RunOptions& opt,
                              const RunRecord& run, int64_t from, int64_t rows,
                              const Grid* resumed) {
  PartProbes out;
  out.resolved = part_probes(all, info, m.shape, opt.boundary.kind == Boundary::Kind::kPeriodic,
                             &out.receivers);
  out.traces = run_traces(run.step_from, run.step_to, static_cast<int64_t>(out.receivers.size()),
                          rows, from + 1);
  if (resumed != nullptr) load_held_rows(&out.traces, part_traces_path(*resumed));
  return out;
}

Status detail::write_traces_on_root(PartProbes* mine, Traces* whole, const std::string& path,
                                    int64_t from, int64_t to) {
  Traces& t = mine->traces;
  // The steps sent, [step0, step1): the same on every rank.
  const int64_t step0 = std::max(from + 1, t.first_step);
  const int64_t step1 = std::max(step0, std::min(to + 1, t.first_step + t.steps));
  auto check_held = [step0, step1](const Traces& held) {
    if (step1 > step0 && (!held.holds(step0) || !held.holds(step1 - 1))) {
      std::fputs("deepgrid: internal error: receivers' values of a round were not held\n", stderr);
      std::abort();
    }
  };
  check_held(t);
  const int64_t row0 = step0 - t.held_from, row1 = step1 - t.held_from;
  std::string packed;
  auto put = [&packed](const auto& v) {
    packed.append(reinterpret_cast<const char*>(&v), sizeof v);
  };
  for (size_t j = 0; j < mine->receivers.size(); ++j) {
    put(mine->receivers[j]);
    for (int64_t s = row0; s < row1; ++s) put(t.values[static_cast<size_t>(s * t.receivers) + j]);
  }
  const std::vector<std::string> parts = gather(packed);
  hold_from(&t, to + 1);
  if (rank() != 0) return agree(Status::Ok());
  check_held(*whole);
  for (const std::string& p : parts) {
    const char* at = p.data();
    for (const char* end = at + p.size(); at < end;) {
      int64_t r = 0;
      std::memcpy(&r, at, sizeof r);
      at += sizeof r;
      for (int64_t s = step0; s < step1; ++s, at += sizeof(double)) {
        double v = 0;
        std::memcpy(&v, at, sizeof v);
        const int64_t row = s - whole->held_from;
        double& kept = whole->values[static_cast<size_t>(row * whole->receivers + r)];
        // Only what changed, so that the file is rewritten where it changed (write_traces_npy).
        if (!std::isnan(v) && std::memcmp(&kept, &v, sizeof v) != 0) {
          kept = v;
          whole->changed[static_cast<size_t>(row)].store(true, std::memory_order_relaxed);
        }
      }
    }
  }
  const Status saved = write_traces_npy(*whole, path);
  if (saved.ok()) hold_from(whole, to + 1);
  return agree(saved);
}

namespace {

// How many of the run's receivers lie in `block`.
int64_t receivers_in(const ResolvedProbes& all, const Block& block) {
  return std::count_if(all.receivers.begin(), all.receivers.end(),
                       [&block](const ProbePoint& q) { return block.contains(q.x, q.y, q.z); });
}

}  // namespace

Status detail::leave_room_for_traces(const DistributedManifest& m, const DistributedManifest& next,
                                     const ResolvedProbes& all, int64_t rows, bool resumed,
                                     RunOptions* opt) {
  int64_t mine = receivers_in(all, next.parts[static_cast<size_t>(rank())].block);
  if (resumed && m.ranks() == size()) {
    mine = std::max(mine, receivers_in(all, m.parts[static_cast<size_t>(rank())].block));
  }
  const int64_t whole = rank() == 0 ? static_cast<int64_t>(all.receivers.size()) : 0;
  auto left = budget_beside_traces(opt->mem_budget, rows, whole + mine,
                                   whole > 0 ? "the whole grid's and this rank's part's" : "");
  DG_RETURN_IF_ERROR(agree(left.status()));
  opt->mem_budget = *left;
  return Status::Ok();
}

}  // namespace deepgrid::mpi
