#include "cli/distributed_commands.h"

#include <cstdio>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "cli/grid_fields.h"
#include "cli/progress.h"
#include "deepgrid/checksum.h"
#include "deepgrid/machine.h"
#include "deepgrid/npy.h"
#include "plan/device_rates.h"
#include "store/distributed_manifest.h"
#ifdef DEEPGRID_MPI
#include "mpi/comm.h"
#include "mpi/distributed_grid.h"
#endif

namespace deepgrid::cli {

using nlohmann::json;

namespace {

#ifdef DEEPGRID_MPI
std::unique_ptr<mpi::Session> g_session;
#endif

// The manifest, and every plane in order on the printing rank: through MPI in a job, else
// read from the parts.
Result<DistributedManifest> load(const std::string& dir) {
#ifdef DEEPGRID_MPI
  if (in_mpi_job()) return mpi::load_distributed(dir);
#endif
  return read_distributed_manifest(dir);
}

io::PlaneSource planes(const DistributedManifest& m, bool verify) {
  return [&m, verify](const io::PlaneConsumer& consume) {
#ifdef DEEPGRID_MPI
    if (in_mpi_job()) return mpi::gather_planes(m, verify, consume);
#endif
    return read_distributed_planes(m, verify, consume);
  };
}

std::vector<std::string> describe(const DistributedManifest& m) {
#ifdef DEEPGRID_MPI
  if (in_mpi_job()) return mpi::describe_parts(m);
#endif
  std::vector<std::string> out;
  for (int r = 0; r < m.ranks(); ++r) out.push_back(describe_part(m, r));
  return out;
}

#ifdef DEEPGRID_MPI
// options->machine for a run of `m` under mpirun: the rates when it may stream
// (`measure_machine`), else the tiles' tuning; rank 0 first: the others then read its cache
// (same disks).
Status set_machine_profile(const DistributedManifest& m, bool measure_machine, bool remeasure,
                           RunOptions* options, bool device_rates = false) {
  if (options->scheme.component_count() == 0) return Status::Ok();
  mpi::share_machine(options);  // measured with the threads each rank will run
  auto host_profile = [&]() -> Result<MachineProfile> {
    if (measure_machine) {  // a part on this rank's disks, or near them
      DG_ASSIGN_OR_RETURN(const Grid part,
                          open_part_as_is(m, mpi::rank() % m.ranks(), Grid::Mode::kReadOnly));
      return machine_profile(part, options->scheme, options->threads, remeasure,
                             options->mem_budget);
    }
    const Shape part = m.parts[static_cast<size_t>(mpi::rank() % m.ranks())].shape();
    return machine_tuning(options->scheme, m.dtype, part.nx, options->threads, remeasure,
                          options->mem_budget);
  };
  // With `device_rates` (a plan's predictions) and a device named or taken (the device method:
  // share_machine), that device's rates, as a serial plan measures them.
  auto this_ranks_profile = [&]() -> Result<MachineProfile> {
    DG_ASSIGN_OR_RETURN(MachineProfile profile, host_profile());
    if (device_rates && !options->device.empty()) {
      DG_ASSIGN_OR_RETURN(const internal::DeviceRates rates,
                          internal::device_rates(options->device, options->scheme, m.dtype,
                                                 options->device_mem, remeasure));
      profile.device_mlups = rates.step_mlups;
      profile.device_copy_bps = rates.copy_bps;
    }
    return profile;
  };
  Result<MachineProfile> profile = MachineProfile{};
  for (int turn = 0; turn < 2; ++turn) {
    if ((mpi::rank() == 0) == (turn == 0)) profile = this_ranks_profile();
    DG_RETURN_IF_ERROR(mpi::agree(profile.status()));
  }
  options->machine = *profile;
  return Status::Ok();
}

// --procs as given: empty for none.
Result<std::optional<ProcessGrid>> procs_option(const std::string& text) {
  if (text.empty()) return std::optional<ProcessGrid>();
  DG_ASSIGN_OR_RETURN(const ProcessGrid g, parse_process_grid(text));
  return std::optional<ProcessGrid>(g);
}
#else
Status built_without_mpi() {
  return unsupported(
      "this deepgrid was built without MPI and cannot run under mpirun; install "
      "libopenmpi-dev and build with -DDEEPGRID_MPI=ON, or run without mpirun");
}
#endif

}  // namespace

bool in_mpi_job() {
#ifdef DEEPGRID_MPI
  return g_session != nullptr;
#else
  return false;
#endif
}

Status start_mpi_if_launched(int* argc, char*** argv) {
#ifdef DEEPGRID_MPI
  if (mpi::launched_by_mpirun()) g_session = std::make_unique<mpi::Session>(argc, argv);
  return Status::Ok();
#else
  (void)argc;
  (void)argv;
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK"}) {
    if (std::getenv(var) != nullptr) return built_without_mpi();
  }
  return Status::Ok();
#endif
}

Status start_mpi_alone() {
#ifdef DEEPGRID_MPI
  g_session = std::make_unique<mpi::Session>(nullptr, nullptr);
  return Status::Ok();
#else
  return unsupported(
      "this deepgrid was built without MPI, which runs distributed grids; install "
      "libopenmpi-dev and build with -DDEEPGRID_MPI=ON");
#endif
}

bool prints() {
#ifdef DEEPGRID_MPI
  return !in_mpi_job() || mpi::rank() == 0;
#else
  return true;
#endif
}

Status distributed_info(const std::string& dir, bool as_json) {
  DG_ASSIGN_OR_RETURN(const DistributedManifest m, load(dir));
  const std::vector<std::string> parts = describe(m);
  if (!prints()) return Status::Ok();
  if (as_json) {
    json j = json::parse(m.to_json());
    j["directory"] = dir;
    j["parts_state"] = parts;
    j["kernel"] = kernel_json(m.as_grid());
    std::printf("%s\n", j.dump().c_str());
    return Status::Ok();
  }
  std::printf("grid        %s (distributed over %d rank%s, process grid %s)\n", dir.c_str(),
              m.ranks(), m.ranks() == 1 ? "" : "s", m.procs.to_string().c_str());
  std::printf("shape       %s (numpy shape (%lld, %lld, %lld)), %s\n", m.shape.to_string().c_str(),
              static_cast<long long>(m.shape.nz), static_cast<long long>(m.shape.ny),
              static_cast<long long>(m.shape.nx), std::string(dtype_name(m.dtype)).c_str());
  std::printf("%s", fields_lines(m.as_grid()).c_str());
  std::printf("%s", kernel_lines(m.as_grid()).c_str());
  std::printf("time step   %lld\n", static_cast<long long>(m.step));
  std::printf("parts\n");
  for (const std::string& p : parts) std::printf("  %s\n", p.c_str());
  std::printf("history\n");
  for (const auto& h : m.history) {
    std::printf("  %s  %-7s %s\n", h.date.c_str(), h.command.c_str(), h.details.c_str());
  }
  return Status::Ok();
}

Result<GridSummary> distributed_summary(const std::string& dir, bool verify,
                                        const std::string& field, int64_t* step) {
  DG_ASSIGN_OR_RETURN(const DistributedManifest m, load(dir));
  *step = m.step;
  const Manifest grid = m.as_grid();
  int component = -1;  // every component
  if (!field.empty()) {
    DG_ASSIGN_OR_RETURN(component, field_component(grid, field));
  }
  return summarize_grid_planes(grid, planes(m, verify), component);
}

Status distributed_export(const std::string& dir, bool verify, const GridWriter& write) {
  DG_ASSIGN_OR_RETURN(const DistributedManifest m, load(dir));
  const Manifest grid = m.as_grid();
  const io::PlaneSource source = planes(m, verify);
#ifdef DEEPGRID_MPI
  if (in_mpi_job()) {
    return mpi::on_root_with_planes(
        source, [&](const io::PlaneSource& planes) { return write(grid, planes); });
  }
#endif
  return write(grid, source);
}

Result<SliceImageInfo> distributed_plot(const std::string& dir, SliceSpec slice,
                                        const std::string& out, const std::string& field) {
  DG_ASSIGN_OR_RETURN(const DistributedManifest m, load(dir));
  const Manifest grid = m.as_grid();
  DG_ASSIGN_OR_RETURN(slice.component, field_component(grid, field));
  // Checked on every rank alike: past this, the printing rank reads every plane.
  DG_RETURN_IF_ERROR(check_slice(m.shape, m.components(), &slice));
  const io::PlaneSource source = planes(m, /*verify=*/false);
#ifdef DEEPGRID_MPI
  if (in_mpi_job()) {
    Result<SliceImageInfo> drawn = SliceImageInfo{};  // (what the other ranks return)
    DG_RETURN_IF_ERROR(mpi::on_root_with_planes(source, [&](const io::PlaneSource& planes) {
      drawn = write_slice_png(grid, planes, slice, out, grid_display_name(dir));
      return drawn.status();
    }));
    return drawn;
  }
#endif
  return write_slice_png(grid, source, slice, out, grid_display_name(dir));
}

Status mpi_create(const std::string& dir, const CreateOptions& options, const std::string& procs,
                  bool as_json) {
#ifdef DEEPGRID_MPI
  DG_ASSIGN_OR_RETURN(const std::optional<ProcessGrid> grid, procs_option(procs));
  DG_ASSIGN_OR_RETURN(const DistributedManifest m, mpi::create_distributed(dir, options, grid));
  if (!prints()) return Status::Ok();
  if (as_json) {
    std::printf("%s", m.to_json().c_str());
  } else {
    std::printf("created %s: %s %s%s, init %s, %d parts (process grid %s, blocks of %s to %s)\n",
                dir.c_str(), m.shape.to_string().c_str(), std::string(dtype_name(m.dtype)).c_str(),
                fields_text(m.as_grid()).c_str(), options.init.to_string().c_str(), m.ranks(),
                m.procs.to_string().c_str(), m.parts.back().shape().to_string().c_str(),
                m.parts.front().shape().to_string().c_str());
  }
  return Status::Ok();
#else
  (void)dir, (void)options, (void)procs, (void)as_json;
  return built_without_mpi();
#endif
}

Status mpi_import(const std::string& npy_path, const std::string& dir,
                  const std::vector<std::string>& stores, const std::string& procs) {
#ifdef DEEPGRID_MPI
  DG_ASSIGN_OR_RETURN(const std::optional<ProcessGrid> grid, procs_option(procs));
  DG_ASSIGN_OR_RETURN(const DistributedManifest m,
                      mpi::import_distributed(npy_path, dir, stores, grid));
  if (prints()) {
    std::printf("imported %s into %s: %s %s, %d parts (process grid %s)\n", npy_path.c_str(),
                dir.c_str(), m.shape.to_string().c_str(), std::string(dtype_name(m.dtype)).c_str(),
                m.ranks(), m.procs.to_string().c_str());
  }
  return Status::Ok();
#else
  (void)npy_path, (void)dir, (void)stores, (void)procs;
  return built_without_mpi();
#endif
}

Status mpi_split(const std::string& serial_dir, const std::string& dir,
                 const std::vector<std::string>& stores, const std::string& procs, bool verify,
                 bool as_json) {
#ifdef DEEPGRID_MPI
  DG_ASSIGN_OR_RETURN(const std::optional<ProcessGrid> grid, procs_option(procs));
  DG_ASSIGN_OR_RETURN(const DistributedManifest m,
                      mpi::split_distributed(serial_dir, dir, stores, grid, verify));
  if (!prints()) return Status::Ok();
  if (as_json) {
    std::printf("%s", m.to_json().c_str());
  } else {
    std::printf("split %s into %s: %s %s%s at time step %lld, %d part%s (process grid %s)\n",
                serial_dir.c_str(), dir.c_str(), m.shape.to_string().c_str(),
                std::string(dtype_name(m.dtype)).c_str(), fields_text(m.as_grid()).c_str(),
                static_cast<long long>(m.step), m.ranks(), m.ranks() == 1 ? "" : "s",
                m.procs.to_string().c_str());
  }
  return Status::Ok();
#else
  (void)serial_dir, (void)dir, (void)stores, (void)procs, (void)verify, (void)as_json;
  return built_without_mpi();
#endif
}

Status mpi_import_field(const std::string& npy_path, const std::string& dir,
                        const std::string& field) {
#ifdef DEEPGRID_MPI
  DG_ASSIGN_OR_RETURN(const DistributedManifest m, mpi::load_distributed(dir));
  DG_ASSIGN_OR_RETURN(const int component, field_component(m.as_grid(), field));
  DG_RETURN_IF_ERROR(mpi::import_field_distributed(npy_path, dir, component));
  if (prints()) {
    std::printf("imported %s into field %s of %s\n", npy_path.c_str(), field.c_str(), dir.c_str());
  }
  return Status::Ok();
#else
  (void)npy_path, (void)dir, (void)field;
  return built_without_mpi();
#endif
}

Result<int> mpi_run(const std::string& dir, RunOptions options, const std::string& procs,
                    bool measure_machine, bool remeasure, bool as_json) {
#ifdef DEEPGRID_MPI
  DG_ASSIGN_OR_RETURN(const std::optional<ProcessGrid> grid, procs_option(procs));
  DG_ASSIGN_OR_RETURN(const DistributedManifest m, mpi::load_distributed(dir));
  {  // the grid's own scheme unless one is given, or the stopped run's when resuming; each
     // rank loads a user's kernel itself
    const std::optional<RunRecord> stopped = options.resume ? mpi::recorded_run(m) : std::nullopt;
    auto scheme = stopped          ? Scheme::from_grid_record(stopped->stencil)
                  : options.resume ? Result<Scheme>(options.scheme)  // refused by the run
                                   : scheme_for(m.as_grid(), options.scheme);
    DG_RETURN_IF_ERROR(mpi::agree(scheme.status()));
    options.scheme = std::move(scheme).value();
  }
  DG_RETURN_IF_ERROR(set_machine_profile(m, measure_machine, remeasure, &options));
  install_interrupt_handler();  // mpirun passes Ctrl-C on as SIGINT to every rank
  options.progress = prints() ? terminal_progress("run")
                              : ProgressFn([](int64_t, int64_t) { return !interrupted(); });
  DG_ASSIGN_OR_RETURN(const mpi::DistributedRunReport r, mpi::run_distributed(dir, options, grid));
  if (!prints()) return r.total.step_to < r.total.step_target ? kExitStopped : 0;
  std::printf("%s", as_json ? (r.to_json() + "\n").c_str() : r.to_text().c_str());
  if (r.total.step_to < r.total.step_target) {
    std::fprintf(stderr,
                 "stopped early: every part holds time step %lld or later; finish the "
                 "remaining steps with 'mpirun -n %d deepgrid run %s --resume'\n",
                 static_cast<long long>(r.total.step_to), r.ranks, dir.c_str());
    return kExitStopped;
  }
  return 0;
#else
  (void)dir, (void)options, (void)procs, (void)measure_machine, (void)remeasure, (void)as_json;
  return Result<int>(built_without_mpi());
#endif
}

Status mpi_plan(const std::string& dir, RunOptions options, const std::string& procs,
                bool measure_machine, bool remeasure, bool as_json) {
#ifdef DEEPGRID_MPI
  DG_ASSIGN_OR_RETURN(const std::optional<ProcessGrid> grid, procs_option(procs));
  DG_ASSIGN_OR_RETURN(const DistributedManifest m, mpi::load_distributed(dir));
  auto scheme = scheme_for(m.as_grid(), options.scheme);
  DG_RETURN_IF_ERROR(mpi::agree(scheme.status()));
  options.scheme = std::move(scheme).value();
  DG_RETURN_IF_ERROR(set_machine_profile(m, measure_machine, remeasure, &options, true));
  DG_ASSIGN_OR_RETURN(const mpi::DistributedPlan plan, mpi::plan_distributed(dir, options, grid));
  if (prints())
    std::printf("%s", as_json ? (plan.to_json() + "\n").c_str() : plan.to_text().c_str());
  return Status::Ok();
#else
  (void)dir, (void)options, (void)procs, (void)measure_machine, (void)remeasure, (void)as_json;
  return built_without_mpi();
#endif
}

Status refuse_procs_serially(const std::string& procs) {
  if (procs.empty()) return Status::Ok();
  return invalid_argument("--procs " + procs +
                          " splits a grid over the ranks of an MPI job; run the command under "
                          "mpirun -n P, or leave --procs out");
}

Status refuse_distributed(const std::string& dir, const std::string& command) {
  if (in_mpi_job() || !is_distributed_grid(dir)) return Status::Ok();
  DG_ASSIGN_OR_RETURN(const DistributedManifest m, read_distributed_manifest(dir));
  const std::string ranks = std::to_string(m.ranks()) + (m.ranks() == 1 ? " rank" : " ranks");
  return invalid_argument(dir + " is a grid distributed over " + ranks + "; '" + command +
                          "' does not work on distributed grids yet (info, checksum, export, "
                          "plot, plan and run do, and import --field under mpirun)");
}

Status refuse_under_mpi(const std::string& command) {
  if (!in_mpi_job()) return Status::Ok();
  return invalid_argument("'deepgrid " + command +
                          "' does not run under mpirun; run it without mpirun (create, import, "
                          "split, run, info, checksum, export and plot work under mpirun)");
}

}  // namespace deepgrid::cli
