// A grid held in memory by the in-core engine (or in a device's memory by the device engine):
// the in-core, mmap and device methods' runs load it, advance it and write it back, and a
// distributed run keeps each part that fits its budget here from its first halo exchange to its
// last, so that a round costs no disk traffic (the halos are exchanged in memory too). Nothing
// reaches the grid's files until write_replacement() writes the state held beside them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "core/decomposition.h"
#include "deepgrid/plane_transfer.h"
#include "deepgrid/probes.h"
#include "deepgrid/report.h"
#include "deepgrid/run.h"
#include "deepgrid/status.h"
#include "deepgrid/store.h"
#include "engines/device_engine.h"
#include "engines/incore_engine.h"
#include "plan/plan.h"

namespace deepgrid {

// Whether a distributed run holds a part planned so here between its rounds: in memory (the
// in-core method), or on its device or in host memory beside it (the device method's
// device-resident and host-resident placements); a three-tier device part sweeps its files.
bool held_between_rounds(const RunPlan& plan);

class ResidentGrid {
 public:
  // Loads `grid` into the engine of `plan` (prepare_run's for `options` on `grid`, an in-core,
  // mmap or device plan; options.steps is the most one advance() will take), verifying each
  // plane's hash when the grid verifies.
  static Result<ResidentGrid> load(const Grid& grid, const RunOptions& options, RunPlan plan);

  ResidentGrid(ResidentGrid&&) noexcept;
  ResidentGrid& operator=(ResidentGrid&&) noexcept;
  ~ResidentGrid();

  // Advances up to options.steps steps (at most those planned for) from time step `step` (the
  // probes' clock), applying `probes` (the grid's coordinates; null: none); fewer when
  // options.progress, asked after each pass, says to stop. `late`: halos that arrive during
  // the first pass (engines/incore_engine.h). The report gives the steps done, as compute time
  // the time spent in the engine outside late.arrive, and the device method's copies of this
  // advance (describe() gives them since the load).
  Result<RunReport> advance(const RunOptions& options, int64_t step, const ResolvedProbes* probes,
                            const LateHalos& late = {});

  // Copies the values of the x-y rectangle of `box` in each of its planes out of and into the
  // state held, packed: the rectangle's rows of every component, one component after another
  // (as Grid::read_planes gives a whole plane), plane after plane.
  Status read_box(const Block& box, std::byte* out) const;
  Status write_box(const Block& box, const std::byte* in);

  // What waits for a copy that runs beside the caller: returns once it is done. Empty when
  // the copy was done before it was returned.
  using CopyWait = std::function<Status()>;
  // read_box's or write_box's copy, started: a device's runs on its transfer queue beside the
  // caller (and the device's later steps wait for a copy in), the others are done on return;
  // `packed` stays as it is until the wait returned has returned (a copy in by late halos'
  // `arrive`: until advance returns, which waits for it).
  Result<CopyWait> start_box_copy(const Block& box, std::byte* packed,
                                  internal::RectCopy direction);
  // `bytes` of host memory for what read_box and write_box copy: a device's pinned memory,
  // which its copies need to run at the bus's rate; null where the heap serves as well.
  std::shared_ptr<std::byte> transfer_memory(size_t bytes) const;

  // The state held, plane by plane in order (every component of each, packed), for what reads
  // a grid's planes (a snapshot). Holds one plane.
  io::PlaneSource planes(const Shape& shape) const;

  // Writes the state held into the grid's replacement files (Grid::create_replacement), for
  // the caller to commit (commit_replacement, or prepare_replacement and commit_prepared).
  // The replacement shares the grid's coefficient files, which it does not write; once boxes
  // were written into the state held (a distributed run's halos: write_box), its
  // coefficients may differ from the files' in those boxes, so each plane's checksum is then
  // taken over the coefficients the files hold.
  Status write_replacement(Grid& grid) const;

  // The engine's figures in `r`: threads, bt and tile, or the device's (its memory, and what
  // went between host and device so far: a run's load, advances and, once written, store).
  void describe(RunReport* r) const;

  const RunPlan& plan() const { return plan_; }

  // The engine behind the state held (defined in resident_grid.cc).
  class Engine;

 private:
  ResidentGrid(RunPlan plan, std::unique_ptr<Engine> engine);

  RunPlan plan_;
  std::unique_ptr<Engine> engine_;
  bool boxes_written_ = false;  // write_box since the load
};

}  // namespace deepgrid
