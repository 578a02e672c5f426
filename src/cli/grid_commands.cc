// deepgrid create, import, split, info, relocate and upgrade: making a grid (empty, from a .npy
// file, or one field of it filled from one; a distributed one from a serial one), describing
// one, moving its files and bringing it to this deepgrid's format. Under
// mpirun, or for a distributed grid, the work goes to distributed_commands.h.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "cli/command_support.h"
#include "cli/commands.h"
#include "cli/distributed_commands.h"
#include "cli/grid_fields.h"
#include "deepgrid/npy.h"
#include "deepgrid/run.h"
#include "deepgrid/store.h"
#include "run/lifecycle.h"
#include "store/distributed_manifest.h"
#include "store/grid_files.h"

namespace deepgrid::cli {
namespace {

using nlohmann::json;

// The coefficient fields of a grid made before coefficient files, kept in its data files
// (Grid::upgrade moves them), comma-separated; empty for any other grid.
std::string coefficients_in_ring(const Manifest& m) {
  if (m.has_coef_files()) return "";
  std::vector<std::string> names = m.field_names();
  names.erase(names.begin(), names.end() - m.scheme_coef_components());
  return join_csv(names);
}

// Whether the data hold the manifest's step, and what is left to finish.
std::string grid_state(const Grid& g) {
  const std::optional<RunRecord> run = unfinished_run(g);
  const std::string finish = "; finish it with 'deepgrid run " + g.dir() + " --resume'";
  if (!g.interrupted_sweep().empty()) {
    if (!g.sweep_record()) return "DAMAGED: " + g.interrupted_sweep() + "; restore from a backup";
    return "INTERRUPTED in an in-place " + g.interrupted_sweep() +
           " (planes mix two time steps until it is finished)" + finish;
  }
  if (run) {
    return "consistent at this step; an unfinished run to step " + std::to_string(run->step_to) +
           " stopped here" + finish;
  }
  return "consistent (the data hold this time step)";
}

json manifest_json(const Grid& g) {
  json j = json::parse(g.manifest().to_json());
  j["directory"] = g.dir();
  j["direct_io"] = g.direct_io();
  j["bytes_on_disk"] = g.manifest().layout.disk_bytes();
  j["interrupted_sweep"] = g.interrupted_sweep();  // empty: the data hold the step shown
  j["state"] = grid_state(g);
  j["kernel"] = kernel_json(g.manifest());
  return j;
}

void print_info(const Grid& g) {
  const Manifest& m = g.manifest();
  const int64_t total = m.layout.disk_bytes();
  std::printf("grid        %s\n", g.dir().c_str());
  std::printf("shape       %s (numpy shape (%lld, %lld, %lld)), %s\n", m.shape.to_string().c_str(),
              static_cast<long long>(m.shape.nz), static_cast<long long>(m.shape.ny),
              static_cast<long long>(m.shape.nx), std::string(dtype_name(m.dtype)).c_str());
  std::printf(
      "values      %lld (%s)\n", static_cast<long long>(m.shape.points() * m.components()),
      format_size(static_cast<uint64_t>(m.shape.points() * m.components()) * dtype_size(m.dtype))
          .c_str());
  std::printf("%s", fields_lines(m).c_str());
  std::printf("%s", kernel_lines(m).c_str());
  std::printf("time step   %lld\n", static_cast<long long>(m.step));
  std::printf("state       %s\n", grid_state(g).c_str());
  std::printf(
      "layout      planes of %s%s, slots of %s, %lld spare slots, %lld slots per chunk, %zu "
      "file%s, %s on disk\n",
      format_size(static_cast<uint64_t>(m.layout.plane_bytes)).c_str(),
      m.has_coef_files() ? (" (" + format_size(static_cast<uint64_t>(m.layout.coef_bytes)) +
                            " of coefficients in coefficient files)")
                               .c_str()
                         : "",
      format_size(static_cast<uint64_t>(m.layout.plane_stride)).c_str(),
      static_cast<long long>(m.layout.spare_planes),
      static_cast<long long>(m.layout.planes_per_chunk), m.layout.files.size(),
      m.layout.files.size() == 1 ? "" : "s", format_size(static_cast<uint64_t>(total)).c_str());
  if (const std::string fields = coefficients_in_ring(m); !fields.empty()) {
    std::printf(
        "upgrade     %s in the data files, rewritten by every sweep: 'deepgrid upgrade %s' "
        "moves %s to coefficient files\n",
        fields.c_str(), g.dir().c_str(), fields.find(',') == std::string::npos ? "it" : "them");
  }
  std::printf("stores      %s\n", m.stores.empty() ? "none: the data are in the grid directory"
                                                   : join_csv(m.stores).c_str());
  for (int f = 0; f < static_cast<int>(m.layout.files.size()); ++f) {
    std::printf("  file %d    %s\n", f, g.file_path(f).c_str());
  }
  for (int f = 0; f < static_cast<int>(m.layout.coef_files.size()); ++f) {
    std::printf("  coef %d    %s\n", f, g.coef_path(f).c_str());
  }
  std::printf("direct I/O  %s\n",
              g.direct_io() ? "yes (O_DIRECT)" : "no (filesystem refuses O_DIRECT)");
  std::printf("history\n");
  for (const auto& h : m.history) {
    std::printf("  %s  %-7s %s\n", h.date.c_str(), h.command.c_str(), h.details.c_str());
  }
}

struct CreateArgs {
  std::string dir, shape, dtype = "f32", init = "zero", stores, scheme, procs;
  int64_t spare_planes = -1;
  bool json = false;
};

int cmd_create(const CreateArgs& a) {
  CreateOptions opt;
  opt.shape = get(parse_shape(a.shape));
  opt.dtype = get(parse_dtype(a.dtype));
  opt.init = get(parse_init(a.init));
  if (!a.scheme.empty()) {  // a grid of the scheme's fields; it runs without --stencil
    check(create_for_scheme(get(Scheme::resolve(a.scheme)), opt));
  }
  opt.stores = split_csv(a.stores);
  if (a.spare_planes < -1) check(invalid_argument("--spare-planes must be >= 0"));
  opt.spare_planes = a.spare_planes;
  if (in_mpi_job()) {  // a distributed grid over the job's ranks
    check(mpi_create(a.dir, opt, a.procs, a.json));
    return 0;
  }
  check(refuse_procs_serially(a.procs));
  Grid g = get(Grid::create(a.dir, opt));
  if (a.json) {
    std::printf("%s\n", manifest_json(g).dump().c_str());
  } else {
    std::printf("created %s: %s %s%s, init %s, %zu file%s%s\n", a.dir.c_str(),
                opt.shape.to_string().c_str(), std::string(dtype_name(opt.dtype)).c_str(),
                fields_text(g.manifest()).c_str(), opt.init.to_string().c_str(),
                g.manifest().layout.files.size(), g.manifest().layout.files.size() == 1 ? "" : "s",
                g.direct_io() ? "" : " (no O_DIRECT on this filesystem: buffered I/O)");
  }
  return 0;
}

struct InfoArgs {
  std::string dir;
  bool json = false;
};

int cmd_info(const std::string& dir, bool as_json) {
  if (in_mpi_job() || is_distributed_grid(dir)) {
    check(distributed_info(dir, as_json));
    return 0;
  }
  Grid g = get(Grid::open(dir));
  if (as_json)
    std::printf("%s\n", manifest_json(g).dump().c_str());
  else
    print_info(g);
  return 0;
}

struct ImportArgs {
  std::string in, dir, stores, field, procs;
};

int cmd_import(const ImportArgs& a) {
  if (!a.field.empty()) {
    if (in_mpi_job()) {
      check(mpi_import_field(a.in, a.dir, a.field));
      return 0;
    }
    check(refuse_distributed(a.dir, "import --field"));
    Grid g = get(Grid::open(a.dir, Grid::Mode::kReadWrite));
    const int c = field_index(g.manifest(), a.field);
    check(import_npy_field(a.in, g, c));
    std::printf("imported %s into field %s of %s\n", a.in.c_str(), a.field.c_str(), a.dir.c_str());
    return 0;
  }
  if (in_mpi_job()) {
    check(mpi_import(a.in, a.dir, split_csv(a.stores), a.procs));
    return 0;
  }
  check(refuse_procs_serially(a.procs));
  Grid g = get(import_npy(a.in, a.dir, split_csv(a.stores)));
  std::printf("imported %s into %s: %s %s\n", a.in.c_str(), a.dir.c_str(),
              g.shape().to_string().c_str(), std::string(dtype_name(g.dtype())).c_str());
  return 0;
}

struct SplitArgs {
  std::string src, dir, stores, procs;
  bool verify = false, json = false;
};

int cmd_split(const SplitArgs& a) {
  const bool alone = !in_mpi_job();
  if (alone) {  // a job of one rank, as a serial run of a distributed grid
    check(refuse_procs_serially(a.procs));
    // The input is checked before MPI starts (the library checks it again), so that a build
    // or a machine where MPI cannot start alone still says first what is wrong with it.
    check(open_to_split(a.src, a.dir).status());
    check(internal::check_new_grid_dir(a.dir).status());
    check(start_mpi_alone());
  }
  check(mpi_split(a.src, a.dir, split_csv(a.stores), a.procs, a.verify, a.json));
  if (alone && !a.json) {
    std::fprintf(stderr,
                 "deepgrid: without mpirun the grid has one part; 'mpirun -n P deepgrid run %s' "
                 "splits it again over P ranks\n",
                 a.dir.c_str());
  }
  return 0;
}

}  // namespace

Command add_create_command(CLI::App& app) {
  auto a = std::make_shared<CreateArgs>();
  auto* create = app.add_subcommand("create", "Create a grid directory with an initial condition");
  create->add_option("DIR", a->dir, "New grid directory (must not exist or be empty)")->required();
  create->add_option("--shape", a->shape, "Extents NXxNYxNZ (x fastest), or NXxNY for 2D")
      ->required();
  create->add_option("--dtype", a->dtype, "f32 or f64")->capture_default_str();
  create
      ->add_option("--init", a->init,
                   "zero | const:V | random:SEED | gaussian | sine (with --scheme: of every "
                   "state field; coefficient fields get the scheme's value)")
      ->capture_default_str();
  create->add_option("--scheme,--kernel", a->scheme,
                     "Make a grid of a scheme's fields (" + schemes_help() +
                         ", a JSON file, docs/schemes.md, or a user's kernel library LIB.so, "
                         "docs/kernels.md); 'deepgrid run' then runs it without "
                         "--stencil. Fill a field with 'deepgrid import IN.npy DIR --field NAME'");
  create->add_option("--store", a->stores,
                     "Comma-separated data directories (e.g. one per SSD); chunks of planes are "
                     "striped round-robin over them. Default: the grid directory");
  create->add_option("--spare-planes", a->spare_planes,
                     "Extra plane slots that let in-place sweeps be resumed after a crash "
                     "(a sweep of bt steps needs more than bt * stencil z-radius; default "
                     "max(64, nz/16))");
  create->add_option(
      "--procs", a->procs,
      "Process grid PXxPYxPZ (product: the number of ranks) to split the grid over under "
      "mpirun, e.g. 2x2x1 (default: chosen from the grid's shape)");
  create->add_flag("--json", a->json, "Print the manifest as JSON");
  return {create, [a] { return cmd_create(*a); }};
}

Command add_info_command(CLI::App& app) {
  auto a = std::make_shared<InfoArgs>();
  auto* info = app.add_subcommand("info", "Show a grid's shape, layout, time step and history");
  info->add_option("DIR", a->dir, "Grid directory")->required();
  info->add_flag("--json", a->json, "Print as one JSON object");
  return {info, [a] { return cmd_info(a->dir, a->json); }};
}

Command add_import_command(CLI::App& app) {
  auto a = std::make_shared<ImportArgs>();
  auto* import = app.add_subcommand(
      "import", "Create a grid from a .npy file, or fill one field of a grid (streamed)");
  import->add_option("IN", a->in, "Input .npy: float32/float64, shape (nz, ny, nx) or (ny, nx)")
      ->required();
  import->add_option("DIR", a->dir, "New grid directory")->required();
  import->add_option("--store", a->stores, "Comma-separated data directories");
  import->add_option(
      "--procs", a->procs,
      "Process grid PXxPYxPZ (product: the number of ranks) to split the grid over under "
      "mpirun, e.g. 2x2x1 (default: chosen from the grid's shape)");
  import->add_option("--field", a->field,
                     "Fill this field of the existing grid DIR (e.g. a velocity model made with "
                     "'create --scheme'); the array must have the grid's shape and dtype");
  return {import, [a] { return cmd_import(*a); }};
}

Command add_split_command(CLI::App& app) {
  auto a = std::make_shared<SplitArgs>();
  auto* split = app.add_subcommand(
      "split",
      "Make a distributed grid of a serial grid's values under mpirun -n P (the serial grid "
      "stays as it is; each rank reads its own block)");
  split->add_option("SERIAL_DIR", a->src, "Serial grid directory")->required();
  split->add_option("DIR", a->dir, "New distributed grid directory (must not exist or be empty)")
      ->required();
  split->add_option("--store", a->stores,
                    "Comma-separated data directories of each rank's part; %r stands for the "
                    "rank (e.g. /ssd0/%r,/ssd1/%r). Default: the grid directory");
  split->add_option(
      "--procs", a->procs,
      "Process grid PXxPYxPZ (product: the number of ranks), e.g. 2x2x1 (default: chosen from "
      "the grid's shape, as create does)");
  split->add_flag("--verify", a->verify,
                  "Check the serial grid's planes against its checksums as they are read (each "
                  "rank then reads whole planes, not only its block)");
  split->add_flag("--json", a->json, "Print the new grid's manifest as JSON");
  return {split, [a] { return cmd_split(*a); }};
}

struct RelocateArgs {
  std::string dir, stores;
  bool json = false;
};

int cmd_relocate(const RelocateArgs& a) {
  check(refuse_under_mpi("relocate"));
  check(refuse_distributed(a.dir, "relocate"));
  const Relocation r = get(relocate_grid(a.dir, split_csv(a.stores)));
  const Manifest m = get(Grid::open(a.dir)).manifest();
  if (a.json) {
    std::printf("%s\n", json{{"directory", a.dir},
                             {"stores", m.stores},
                             {"copied", r.copied},
                             {"found", r.found},
                             {"checked", r.checked}}
                            .dump()
                            .c_str());
    return 0;
  }
  // (Grids with coefficient files move those too, counted with the data files.)
  std::printf(
      "relocated %s to %s: %d %sfile%s copied, %d found in place%s\n", a.dir.c_str(),
      join_csv(m.stores).c_str(), r.copied, m.has_coef_files() ? "data and coefficient " : "data ",
      r.copied == 1 ? "" : "s", r.found,
      r.checked ? ", every plane matches the grid's checksums" : " (no checksums to check)");
  return 0;
}

Command add_relocate_command(CLI::App& app) {
  auto a = std::make_shared<RelocateArgs>();
  auto* relocate = app.add_subcommand(
      "relocate",
      "Move a grid's data files to new store directories (new disks), and record them: the "
      "one way to change where a grid's data live (docs/security.md)");
  relocate->add_option("DIR", a->dir, "Grid directory")->required();
  relocate
      ->add_option("--store", a->stores,
                   "Comma-separated new data directories, as many as the grid has (each "
                   "file is copied there, or taken as it is where a copy is already there, "
                   "and checked against the grid's checksums)")
      ->required();
  relocate->add_flag("--json", a->json, "Print as one JSON object");
  return {relocate, [a] { return cmd_relocate(*a); }};
}

struct UpgradeArgs {
  std::string dir;
  bool json = false;
};

json upgrade_json(const std::string& dir, const Upgrade& u) {
  return {{"directory", dir},
          {"from_version", u.from_version},
          {"to_version", u.to_version},
          {"coefficient_files", u.coefficient_files},
          {"checksums_by_component", u.checksums_by_component}};
}

std::string upgrade_text(const std::string& dir, const Upgrade& u) {
  if (u.coefficient_files.empty() && !u.checksums_by_component) {
    return dir + " needs no upgrade (format version " + std::to_string(u.to_version) + ")";
  }
  std::string what;
  if (!u.coefficient_files.empty()) {
    what = join_csv(u.coefficient_files) +
           " moved to coefficient files (sweeps read them and no longer write them)";
  }
  if (u.checksums_by_component) {
    what += (what.empty() ? "" : "; ") + std::string("checksums recorded by component");
  }
  return "upgraded " + dir + " from format version " + std::to_string(u.from_version) + " to " +
         std::to_string(u.to_version) + ": " + what;
}

// A serial grid, or each part of a distributed one in turn (each part is a grid of its own:
// one upgraded before another's failure stays upgraded, and runs as the others do).
int cmd_upgrade(const UpgradeArgs& a) {
  check(refuse_under_mpi("upgrade"));
  std::vector<std::string> dirs{a.dir};
  if (is_distributed_grid(a.dir)) {
    dirs.clear();
    for (const PartInfo& p : get(read_distributed_manifest(a.dir)).parts) dirs.push_back(p.dir);
  }
  json parts = json::array();
  for (const std::string& dir : dirs) {
    Grid g = get(Grid::open(dir, Grid::Mode::kReadWrite));
    const Upgrade u = get(g.upgrade());
    if (a.json) {
      parts.push_back(upgrade_json(dir, u));
    } else {
      std::printf("%s\n", upgrade_text(dir, u).c_str());
    }
  }
  if (a.json) {
    const json out = dirs.size() == 1 && dirs[0] == a.dir
                         ? parts[0]
                         : json{{"directory", a.dir}, {"parts", parts}};
    std::printf("%s\n", out.dump().c_str());
  }
  return 0;
}

Command add_upgrade_command(CLI::App& app) {
  auto a = std::make_shared<UpgradeArgs>();
  auto* upgrade = app.add_subcommand(
      "upgrade",
      "Bring a grid made by an earlier deepgrid to this one's format: a scheme's coefficient "
      "fields (such as the wave equations' m) out of the data files into coefficient files, "
      "which later sweeps read and never write, and checksums by component (docs/format.md)");
  upgrade->add_option("DIR", a->dir, "Grid directory (of a distributed grid: each part in turn)")
      ->required();
  upgrade->add_flag("--json", a->json, "Print as one JSON object");
  return {upgrade, [a] { return cmd_upgrade(*a); }};
}

}  // namespace deepgrid::cli
