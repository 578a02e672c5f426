// deepgrid._core: the Python boundary of the library (nanobind). Thin: the package in
// python/deepgrid/ adds indexing, interop and plots on top.
//
// Contracts kept here: the GIL is released during runs and all I/O; a run calls back into
// Python after each pass (progress, Ctrl-C via PyErr_CheckSignals) and stops cleanly, with a
// consistent grid, before the Python error is raised; library errors become the exceptions
// of deepgrid.errors with the library's message.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/array.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <array>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "deepgrid/box_io.h"
#include "deepgrid/checksum.h"
#include "deepgrid/machine.h"
#include "deepgrid/npy.h"
#include "deepgrid/probes.h"
#include "deepgrid/run.h"
#include "deepgrid/scheme.h"
#include "deepgrid/stencil.h"
#include "deepgrid/store.h"
#include "deepgrid/traces_file.h"
#include "deepgrid/vtkhdf.h"
#include "device/device.h"
#include "plan/plan.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace deepgrid::python {
namespace {

// A library error on its way to Python (translated by the registered translator).
struct StatusError {
  Status status;
};

void check(const Status& s) {
  if (!s.ok()) throw StatusError{s};
}
template <typename T>
T get(Result<T> r) {
  check(r.status());
  return std::move(r).value();
}

// The key deepgrid.errors.error_class() maps to an exception class.
const char* error_code_key(ErrorCode code) {
  switch (code) {
    case ErrorCode::kOk:
      break;
    case ErrorCode::kInvalidArgument:
      return "invalid_argument";
    case ErrorCode::kNotFound:
      return "not_found";
    case ErrorCode::kIo:
      return "io";
    case ErrorCode::kNoSpace:
      return "no_space";
    case ErrorCode::kCorrupt:
      return "corrupt";
    case ErrorCode::kUnsupported:
      return "unsupported";
    case ErrorCode::kResource:
      return "resource";
    case ErrorCode::kBusy:
      return "busy";
  }
  return "unknown";
}

void translate_status_error(const std::exception_ptr& p, void*) {
  try {
    std::rethrow_exception(p);
  } catch (const StatusError& e) {
    nb::object cls = nb::module_::import_("deepgrid.errors")
                         .attr("error_class")(error_code_key(e.status.code()));
    PyErr_SetString(cls.ptr(), e.status.message().c_str());
  }
}

// Runs `f` without the GIL and raises its error, if any, with the GIL held again.
template <typename F>
auto without_gil(F&& f) {
  using R = decltype(f());
  std::optional<R> r;
  {
    nb::gil_scoped_release release;
    r.emplace(f());
  }
  if constexpr (std::is_same_v<R, Status>) {
    check(*r);
  } else {
    return get(std::move(*r));
  }
}

// numpy's (nz, ny, nx) order.
using NumpyShape = std::tuple<int64_t, int64_t, int64_t>;
// (start, count, step) along one axis.
using Range = std::tuple<int64_t, int64_t, int64_t>;

NumpyShape numpy_shape(const Shape& s) { return {s.nz, s.ny, s.nx}; }

AxisRange axis_range(const Range& r) { return {std::get<0>(r), std::get<1>(r), std::get<2>(r)}; }

const char* numpy_dtype(DType t) { return t == DType::kF32 ? "float32" : "float64"; }

template <typename T>
nb::object read_box_array(const Grid& grid, const Box& box) {
  check(check_box(grid.shape(), box, grid.manifest().components()));
  auto values = std::make_unique<T[]>(static_cast<size_t>(box.points()));
  T* data = values.get();
  without_gil([&] { return read_box(grid, box, data); });
  nb::capsule owner(values.release(), [](void* p) noexcept { delete[] static_cast<T*>(p); });
  nb::ndarray<nb::numpy, T> array(
      data,
      {static_cast<size_t>(box.z.count), static_cast<size_t>(box.y.count),
       static_cast<size_t>(box.x.count)},
      owner);
  return nb::cast(array);
}

using ValuesArray = nb::ndarray<nb::ro, nb::c_contig, nb::device::cpu>;

template <typename T>
void write_box_array(Grid& grid, const Box& box, const ValuesArray& values) {
  if (values.dtype() != nb::dtype<T>()) {
    check(invalid_argument(std::string("values must be ") + numpy_dtype(grid.dtype()) +
                           ", the grid's dtype"));
  }
  if (static_cast<int64_t>(values.size()) != box.points()) {
    check(invalid_argument("got " + std::to_string(values.size()) + " values for a box of " +
                           std::to_string(box.points()) + " points"));
  }
  const void* src = values.data();
  without_gil([&] { return write_box(grid, box, src); });
}

Box make_box(const Range& z, const Range& y, const Range& x, int component) {
  return {axis_range(z), axis_range(y), axis_range(x), component};
}

nb::object summary_dict(const Grid& grid, int component) {
  const GridSummary s = without_gil([&] { return summarize(grid, component); });
  nb::dict d;
  d["sha256"] = s.sha256;
  d["min"] = s.min;
  d["max"] = s.max;
  d["mean"] = s.mean;
  d["l2"] = s.l2;
  d["nan_count"] = s.nan_count;
  return d;
}

// A grid of one field, or of a scheme's fields (scheme: its JSON, as Scheme.to_json gives;
// empty for none) initialised as `deepgrid create --scheme` does.
Grid create_grid(const std::string& path, const NumpyShape& shape, const std::string& dtype,
                 const std::string& init, const std::vector<std::string>& stores,
                 const std::string& scheme_json) {
  CreateOptions o;
  o.shape = {std::get<2>(shape), std::get<1>(shape), std::get<0>(shape)};
  o.dtype = get(parse_dtype(dtype));
  o.init = get(parse_init(init));
  if (!scheme_json.empty()) {
    check(create_for_scheme(get(Scheme::from_record(scheme_json)), o));
  }
  o.stores = stores;
  return without_gil([&] { return Grid::create(path, o); });
}

Grid open_grid(const std::string& path, bool writable) {
  return without_gil(
      [&] { return Grid::open(path, writable ? Grid::Mode::kReadWrite : Grid::Mode::kReadOnly); });
}

// The progress callback of a run: with the GIL, checks for signals (Ctrl-C) and calls the
// Python callback; remembers the first Python error and stops the run on it.
struct RunCallback {
  nb::object callback;  // None or callable(done, total) -> bool | None
  std::optional<nb::python_error> error;

  bool operator()(int64_t done, int64_t total) {
    nb::gil_scoped_acquire acquire;
    try {
      if (PyErr_CheckSignals() != 0) throw nb::python_error();
      if (!callback.is_none()) {
        nb::object keep_going = callback(done, total);
        return keep_going.is_none() || nb::cast<bool>(keep_going);
      }
    } catch (nb::python_error& e) {
      error.emplace(std::move(e));
      return false;
    }
    return true;
  }
};

// The SEG-Y options of traces_to_segy and run (traces_file.h).
SegyOptions segy_options(double dt, const std::tuple<double, double, double>& spacing) {
  SegyOptions o;
  o.dt = dt;
  o.spacing = {std::get<0>(spacing), std::get<1>(spacing), std::get<2>(spacing)};
  return o;
}

using TracesArray = nb::ndarray<const double, nb::ndim<2>, nb::c_contig, nb::device::cpu>;

// Receivers' traces as SEG-Y: from a .npy traces file, or from an array (steps, receivers).
void traces_npy_to_segy(const std::string& npy_path, const std::string& out,
                        const std::string& probes_json, double dt,
                        const std::tuple<double, double, double>& spacing) {
  const Probes probes = get(parse_probes(probes_json));
  nb::gil_scoped_release release;
  check(write_traces_segy(npy_path, probes, out, segy_options(dt, spacing)));
}

void traces_array_to_segy(const TracesArray& values, const std::string& out,
                          const std::string& probes_json, double dt,
                          const std::tuple<double, double, double>& spacing) {
  const Probes probes = get(parse_probes(probes_json));
  const std::span<const double> v(values.data(), values.size());
  nb::gil_scoped_release release;
  check(write_traces_segy(v, static_cast<int64_t>(values.shape(0)),
                          static_cast<int64_t>(values.shape(1)), probes, out,
                          segy_options(dt, spacing)));
}

struct RunArgs {
  std::string stencil_json;  // empty: the grid's own scheme
  std::string probes_json;   // empty: none
  std::string traces;
  double segy_dt = 0;  // traces named .sgy / .segy: SegyOptions
  std::tuple<double, double, double> segy_spacing = {1, 1, 1};
  int64_t steps = 0;
  std::string boundary, method, io;
  uint64_t mem = 0, device_mem = 0;
  std::string device;                   // RunOptions::device
  std::string device_overlap = "auto";  // RunOptions::device_overlap: auto, on, off
  int threads = 0, bt = 0;
  int64_t tile_x = 0, tile_y = 0, band_rows = kAutoBandRows;
  bool resume = false, flush_subnormals = false;
  // Snapshots (RunOptions::snapshots): directory, every K steps, their VTKHDF form.
  std::string snapshots;
  int64_t every = 0, downsample = 1;
  std::vector<int> snapshot_components;
  std::array<double, 3> spacing{1, 1, 1}, origin{0, 0, 0};
};

// The machine's profile as the CLI takes it (cached after the first time), for the scheme the
// run will take (resuming, the unfinished run's): its rates where a run left to choose weighs
// the stream against the in-core method (plan.h: a grid of 1 GiB or more), else the tiles'
// working set and depth tuned for this machine. A grid or scheme that cannot be had here is
// left to run_grid to report (with the working set tuned).
Status profile_machine(const std::string& path, RunOptions* o) {
  auto working_set_only = [o]() -> Status {
    DG_ASSIGN_OR_RETURN(o->machine.cache_bytes,
                        tuned_cache_bytes(0, o->threads, false, o->mem_budget));
    return Status::Ok();
  };
  const Result<Grid> g = Grid::open(path);
  if (!g.ok()) return working_set_only();
  const std::optional<RunRecord> unfinished = o->resume ? unfinished_run(*g) : std::nullopt;
  const Result<Scheme> scheme = unfinished ? Scheme::from_grid_record(unfinished->stencil)
                                           : scheme_for(g->manifest(), o->scheme);
  if (!scheme.ok()) return working_set_only();
  if (weighs_stream(g->manifest(), *o)) {
    DG_ASSIGN_OR_RETURN(o->machine, machine_profile(*g, *scheme, o->threads, false, o->mem_budget));
  } else {
    DG_ASSIGN_OR_RETURN(o->machine, machine_tuning(*scheme, g->dtype(), g->shape().nx, o->threads,
                                                   false, o->mem_budget));
  }
  return Status::Ok();
}

std::string run(const std::string& path, const RunArgs& a, nb::object progress) {
  RunOptions o;
  if (!a.stencil_json.empty()) o.scheme = get(Scheme::from_record(a.stencil_json));
  if (!a.probes_json.empty()) o.probes = get(parse_probes(a.probes_json));
  o.traces_path = a.traces;
  o.segy = segy_options(a.segy_dt, a.segy_spacing);
  o.steps = a.steps;
  o.boundary = get(parse_boundary(a.boundary));
  o.method = get(parse_method(a.method));
  o.io = get(io::parse_backend(a.io));
  o.mem_budget = a.mem;
  o.device = a.device;
  o.device_mem = a.device_mem;
  o.device_overlap = get(parse_device_overlap(a.device_overlap));
  o.threads = a.threads;
  o.bt = a.bt;
  o.tile_x = a.tile_x;
  o.tile_y = a.tile_y;
  o.band_rows = a.band_rows;
  o.resume = a.resume;
  o.flush_subnormals = a.flush_subnormals;
  o.snapshots = {a.snapshots, a.every, {a.origin, a.spacing, a.downsample, a.snapshot_components}};
  auto callback = std::make_shared<RunCallback>(RunCallback{std::move(progress), {}});
  o.progress = [callback](int64_t done, int64_t total) { return (*callback)(done, total); };
  std::optional<Result<RunReport>> report;
  {
    nb::gil_scoped_release release;
    const Status measured = profile_machine(path, &o);
    report.emplace(measured.ok() ? run_grid(path, o) : Result<RunReport>(measured));
  }
  if (callback->error) throw std::move(*callback->error);
  return get(std::move(*report)).to_json();
}

}  // namespace
}  // namespace deepgrid::python

using namespace deepgrid;
using namespace deepgrid::python;

namespace {

// The open grid: its properties, boxes, .npy transfers and summary.
void bind_grid(nb::module_& m) {
  nb::class_<Grid>(m, "Grid", "An open grid directory (from create() or open_grid())")
      .def_prop_ro("path", &Grid::dir, "The grid directory")
      .def_prop_ro(
          "shape", [](const Grid& g) { return numpy_shape(g.shape()); }, "(nz, ny, nx)")
      .def_prop_ro(
          "dtype", [](const Grid& g) { return numpy_dtype(g.dtype()); }, "float32 or float64")
      .def_prop_ro(
          "step", [](const Grid& g) { return g.manifest().step; }, "The time step the data hold")
      .def_prop_ro(
          "planes_per_chunk", [](const Grid& g) { return g.manifest().layout.planes_per_chunk; },
          "Planes per chunk of the layout")
      .def_prop_ro("direct_io", &Grid::direct_io, "Whether the data files use O_DIRECT")
      .def_prop_ro(
          "fields", [](const Grid& g) { return g.manifest().fields; },
          "Component names of a grid of several fields (scheme.h); empty for one field")
      .def_prop_ro(
          "scheme_json", [](const Grid& g) { return g.manifest().scheme; },
          "The JSON of the scheme the grid was made for; empty for none")
      .def(
          "manifest_json", [](const Grid& g) { return g.manifest().to_json(); },
          "The manifest as JSON text")
      .def(
          "read_box",
          [](const Grid& g, const Range& z, const Range& y, const Range& x, int component) {
            const Box box = make_box(z, y, x, component);
            return dispatch_dtype(g.dtype(),
                                  [&](auto tag) { return read_box_array<decltype(tag)>(g, box); });
          },
          "z"_a, "y"_a, "x"_a, "component"_a = 0,
          "Reads the box of (start, count, step) ranges of a component as an array (z.count, "
          "y.count, x.count)")
      .def(
          "write_box",
          [](Grid& g, const Range& z, const Range& y, const Range& x, const ValuesArray& values,
             int component) {
            const Box box = make_box(z, y, x, component);
            dispatch_dtype(g.dtype(),
                           [&](auto tag) { write_box_array<decltype(tag)>(g, box, values); });
          },
          "z"_a, "y"_a, "x"_a, "values"_a, "component"_a = 0,
          "Writes C-contiguous values of the grid's dtype, in box order, to the box of a "
          "component")
      .def(
          "import_npy",
          [](Grid& g, const std::string& npy, int component) {
            without_gil([&] { return import_npy_field(npy, g, component); });
          },
          "npy"_a, "component"_a,
          "Replaces a component with a .npy file's values (the grid's shape and dtype), one "
          "chunk of planes at a time")
      .def("summary", &summary_dict, "component"_a = -1,
           "SHA-256 of the values (of every component, or of one), min, max, mean, L2 norm, NaN "
           "count (streamed)")
      .def(
          "export_npy",
          [](const Grid& g, const std::string& path, int component) {
            without_gil([&] { return export_npy(g, path, component); });
          },
          "path"_a, "component"_a = 0,
          "Writes a component of the grid to a .npy file, one chunk of planes at a time")
      .def(
          "export_vtkhdf",
          [](const Grid& g, const std::string& path, std::array<double, 3> spacing,
             std::array<double, 3> origin, int64_t downsample, std::vector<int> components) {
            const VtkhdfOptions o{origin, spacing, downsample, std::move(components)};
            without_gil([&] { return export_vtkhdf(g, path, o); });
          },
          "path"_a, "spacing"_a, "origin"_a, "downsample"_a, "components"_a,
          "Writes the grid to a VTKHDF ImageData file (x, y, z spacing and origin; every "
          "downsample-th point; the components listed, or every one), plane by plane");
}

// Creating, opening and importing grid directories.
void bind_grid_files(nb::module_& m) {
  m.def("create", &create_grid, "path"_a, "shape"_a, "dtype"_a, "init"_a, "stores"_a,
        "scheme_json"_a,
        "Creates a grid directory, of a scheme's fields when scheme_json is not empty; shape is "
        "(nz, ny, nx)");
  m.def("open_grid", &open_grid, "path"_a, "writable"_a, "Opens a grid directory");
  m.def(
      "import_npy",
      [](const std::string& npy, const std::string& path, const std::vector<std::string>& stores) {
        return without_gil([&] { return import_npy(npy, path, stores); });
      },
      "npy"_a, "path"_a, "stores"_a, "Creates a grid from a .npy file, one chunk at a time");
  m.def(
      "relocate",
      [](const std::string& path, const std::vector<std::string>& stores) {
        const Relocation r = without_gil([&] { return relocate_grid(path, stores); });
        nb::dict out;
        out["copied"] = r.copied;
        out["found"] = r.found;
        out["checked"] = r.checked;
        return out;
      },
      "path"_a, "stores"_a,
      "Moves a grid's data files to new store directories and records them (docs/security.md)");
  m.def(
      "upgrade",
      [](const std::string& path) {
        const Upgrade u = without_gil([&]() -> Result<Upgrade> {
          DG_ASSIGN_OR_RETURN(Grid g, Grid::open(path, Grid::Mode::kReadWrite));
          return g.upgrade();
        });
        nb::dict out;
        out["from_version"] = u.from_version;
        out["to_version"] = u.to_version;
        out["coefficient_files"] = u.coefficient_files;
        out["checksums_by_component"] = u.checksums_by_component;
        return out;
      },
      "path"_a, "Brings a grid made by an earlier deepgrid to this one's format (Grid::upgrade)");
}

// Stencils and schemes: presets, parsing, checking.
void bind_stencils(nb::module_& m) {
  m.def(
      "preset_stencil",
      [](const std::string& name, const std::string& coeffs) {
        Stencil s = get(Stencil::preset(name));
        if (!coeffs.empty()) s = get(s.with_coefficients(coeffs));
        return s.to_json();
      },
      "name"_a, "coeffs"_a, "A preset stencil as JSON, with coefficients per shell or point");
  m.def(
      "canonical_stencil",
      [](const std::string& json) { return get(Stencil::from_json(json)).to_json(); }, "json"_a,
      "Checks a stencil's JSON and returns it with its points in canonical order");
  m.def("preset_names", &preset_names, "Names of the preset stencils");

  nb::class_<Scheme>(m, "Scheme", "A checked scheme (scheme.h): fields, updates, radius")
      .def_static(
          "from_json",
          [](const std::string& text, const std::string& name, const std::string& base_dir) {
            return get(Scheme::from_json(text, name, base_dir));
          },
          "text"_a, "name"_a, "base_dir"_a,
          "Parses and checks a scheme's JSON (docs/schemes.md); `name` when it has none, "
          "`base_dir` for a relative kernel library path")
      .def_static(
          "from_record", [](const std::string& text) { return get(Scheme::from_record(text)); },
          "text"_a, "A stencil's or a scheme's JSON, as to_json() writes it")
      .def_static(
          "from_grid_record",
          [](const std::string& text) { return get(Scheme::from_grid_record(text)); }, "text"_a,
          "A scheme a grid recorded: a kernel library only as the build its SHA-256 names")
      .def_static(
          "resolve",
          [](const std::string& name_or_file) { return get(Scheme::resolve(name_or_file)); },
          "name_or_file"_a,
          "A stencil preset, a scheme preset (wave2/4/8, heat-var), a JSON file or a kernel "
          "library (.so)")
      .def_prop_ro("name", &Scheme::name)
      .def_prop_ro(
          "fields",
          [](const Scheme& s) {
            std::vector<std::tuple<std::string, bool, int, double>> out;
            for (const SchemeField& f : s.fields()) {
              out.emplace_back(f.name, f.coefficient, f.levels, f.value);
            }
            return out;
          },
          "(name, coefficient, levels, value) per field, in declared order")
      .def_prop_ro("components", &Scheme::components, "Component names in plane order")
      .def_prop_ro("radius", &Scheme::radius, "Largest reach of the update along any axis")
      .def_prop_ro("is_stencil", &Scheme::is_stencil, "Whether it is a plain stencil")
      .def("to_json", &Scheme::to_json, "The stencil's JSON for a plain stencil, else the scheme's")
      .def("describe", &Scheme::describe, "e.g. wave8 (fields u[2 levels], m; radius 4)");
  m.def("scheme_preset_names", &scheme_preset_names, "Names of the scheme presets");
  m.def(
      "parse_size", [](const std::string& text) { return get(parse_size(text)); }, "text"_a,
      "Bytes in a size like '2GiB'");
}

// Running a grid (run.h) with a progress callback.
void bind_run(nb::module_& m) {
  nb::class_<RunArgs>(m, "RunArgs", "Options of run(), as run_grid takes them")
      .def(nb::init<>())
      .def_rw("stencil_json", &RunArgs::stencil_json)
      .def_rw("probes_json", &RunArgs::probes_json)
      .def_rw("traces", &RunArgs::traces)
      .def_rw("segy_dt", &RunArgs::segy_dt)
      .def_rw("segy_spacing", &RunArgs::segy_spacing)
      .def_rw("steps", &RunArgs::steps)
      .def_rw("boundary", &RunArgs::boundary)
      .def_rw("method", &RunArgs::method)
      .def_rw("io", &RunArgs::io)
      .def_rw("mem", &RunArgs::mem)
      .def_rw("device", &RunArgs::device)
      .def_rw("device_mem", &RunArgs::device_mem)
      .def_rw("device_overlap", &RunArgs::device_overlap)
      .def_rw("threads", &RunArgs::threads)
      .def_rw("bt", &RunArgs::bt)
      .def_rw("tile_x", &RunArgs::tile_x)
      .def_rw("tile_y", &RunArgs::tile_y)
      .def_rw("band_rows", &RunArgs::band_rows)
      .def_rw("resume", &RunArgs::resume)
      .def_rw("snapshots", &RunArgs::snapshots)
      .def_rw("every", &RunArgs::every)
      .def_rw("downsample", &RunArgs::downsample)
      .def_rw("snapshot_components", &RunArgs::snapshot_components)
      .def_rw("spacing", &RunArgs::spacing)
      .def_rw("origin", &RunArgs::origin)
      .def_rw("flush_subnormals", &RunArgs::flush_subnormals);
  m.def("traces_npy_path", &traces_npy_path, "path"_a,
        "The .npy a run records traces going to path into (path itself, or path + '.npy')");
  m.def("traces_npy_to_segy", &traces_npy_to_segy, "npy_path"_a, "out"_a, "probes_json"_a, "dt"_a,
        "spacing"_a, "Writes a .npy traces file as SEG-Y rev 1 (traces_file.h)");
  m.def("traces_array_to_segy", &traces_array_to_segy, "values"_a, "out"_a, "probes_json"_a, "dt"_a,
        "spacing"_a, "Writes traces of shape (steps, receivers) as SEG-Y rev 1");
  m.def(
      "devices",
      [] {
        std::vector<std::string> out;
        for (const device::DeviceInfo& d : get(device::list_devices())) out.push_back(d.to_json());
        return out;
      },
      "The OpenCL devices (device/device.h), each as JSON");
  m.def("run", &run, "path"_a, "args"_a, "progress"_a.none(),
        "Advances the grid in path; returns the run report as JSON. progress(done, total) is "
        "called after each pass (returning False stops the run cleanly)");
}

}  // namespace

NB_MODULE(_core, m) {
  m.doc() = "deepgrid's C++ core (see the deepgrid package for the documented API)";
  nb::register_exception_translator(translate_status_error);
  bind_grid(m);
  bind_grid_files(m);
  bind_stencils(m);
  bind_run(m);
}
