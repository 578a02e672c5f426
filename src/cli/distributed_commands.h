// The command line's side of distributed grids (store/distributed_manifest.h): info, checksum
// and export of one (serially, or under mpirun), and create and run under mpirun. Builds
// without MPI keep the serial part; under mpirun they refuse with a message saying how to
// build with MPI.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "deepgrid/checksum.h"
#include "deepgrid/image.h"
#include "deepgrid/plane_transfer.h"
#include "deepgrid/run.h"
#include "deepgrid/store.h"

namespace deepgrid::cli {

// Whether this process is one rank of an MPI job (mpirun started it and MPI is initialised).
bool in_mpi_job();
// Starts MPI when mpirun started this process (no-op otherwise); ends it with the process.
// Refuses (exit 2) when this build has no MPI.
Status start_mpi_if_launched(int* argc, char*** argv);
// Starts MPI in this process alone, a job of one rank (MPI's singleton start), so that a
// serial command can run a distributed grid as 'mpirun -n 1' would. Refuses (exit 2) when this
// build has no MPI.
Status start_mpi_alone();
// Whether this rank prints: rank 0 of a job, or a serial process.
bool prints();

// deepgrid info / checksum / export of a distributed grid. The summary (and the grid's time
// step) is that of the printing rank. `field`: --field, one field of a grid of several (empty:
// the checksum covers every component). Export hands the printing rank's `write` every plane.
Status distributed_info(const std::string& dir, bool as_json);
Result<GridSummary> distributed_summary(const std::string& dir, bool verify,
                                        const std::string& field, int64_t* step);
// A writer of a whole grid (`whole` describes it) from its planes, every component of each.
using GridWriter = std::function<Status(const Manifest& whole, const io::PlaneSource& planes)>;
Status distributed_export(const std::string& dir, bool verify, const GridWriter& write);
// deepgrid plot of a distributed grid: the printing rank writes the PNG and gets its figures.
Result<SliceImageInfo> distributed_plot(const std::string& dir, SliceSpec slice,
                                        const std::string& out, const std::string& field);

// mpirun -n P deepgrid create / import / split / run. `measure_machine`: the run may stream, so
// each rank needs this machine's rates for its part (rank 0 measures first; the others find its
// cache); otherwise the ranks get the tiles' tuning the same way. `procs`: --procs PXxPYxPZ as
// given (empty: chosen, or for run the grid's own).
Status mpi_create(const std::string& dir, const CreateOptions& options, const std::string& procs,
                  bool as_json);
Status mpi_import(const std::string& npy_path, const std::string& dir,
                  const std::vector<std::string>& stores, const std::string& procs);
// mpirun -n P deepgrid split SERIAL_DIR DIR: a distributed grid of the serial grid's values.
// `verify`: the serial grid's planes are checked against its checksums as they are read.
Status mpi_split(const std::string& serial_dir, const std::string& dir,
                 const std::vector<std::string>& stores, const std::string& procs, bool verify,
                 bool as_json);
// mpirun -n P deepgrid import IN.npy DIR --field NAME: one field of distributed grid DIR.
Status mpi_import_field(const std::string& npy_path, const std::string& dir,
                        const std::string& field);
// mpirun -n P deepgrid run: the exit code (0, or kExitStopped when an interrupt stopped it).
Result<int> mpi_run(const std::string& dir, RunOptions options, const std::string& procs,
                    bool measure_machine, bool remeasure, bool as_json);
// mpirun -n P deepgrid plan (or plan of a distributed grid serially, as one rank): what the
// run would do, each rank planning its part; rank 0 prints it.
Status mpi_plan(const std::string& dir, RunOptions options, const std::string& procs,
                bool measure_machine, bool remeasure, bool as_json);
// --procs outside an MPI job: a message saying it needs mpirun (nothing when not given).
Status refuse_procs_serially(const std::string& procs);

// For commands that do not work on distributed grids (yet), serially: a message saying what
// does.
Status refuse_distributed(const std::string& dir, const std::string& command);
// For commands that do not work under mpirun.
Status refuse_under_mpi(const std::string& command);

}  // namespace deepgrid::cli
