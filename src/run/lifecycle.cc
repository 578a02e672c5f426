#include "run/lifecycle.h"

#include <unistd.h>

#include <filesystem>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "core/file_util.h"
#include "deepgrid/traces_file.h"
#include "engines/subnormals.h"
#include "store/distributed_manifest.h"

namespace deepgrid {
namespace {

std::string component_list(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

// The grid's planes must hold the scheme's components: the same number, and the same names
// when the grid names them.
Status check_components(const Manifest& m, const Scheme& scheme) {
  const std::vector<std::string> grid = m.field_names();
  const bool match = m.fields.empty() ? scheme.component_count() == 1 : grid == scheme.components();
  if (!match) {
    return invalid_argument("the grid's planes hold " + component_list(grid) + " but " +
                            scheme.name() + " needs " + component_list(scheme.components()) +
                            "; run the scheme the grid was created with (deepgrid info shows "
                            "it) or create a grid with --scheme " +
                            scheme.name());
  }
  return Status::Ok();
}

}  // namespace

Result<Scheme> scheme_for(const Manifest& m, const Scheme& given) {
  if (given.component_count() > 0) return given;
  if (m.scheme.empty()) {
    return invalid_argument(
        "no stencil or scheme given and the grid has none of its own; give "
        "--stencil (e.g. 7pt) or --scheme (e.g. wave8)");
  }
  auto s = Scheme::from_grid_record(m.scheme);
  if (s.ok()) return s;
  // A kernel library that moved or changed is the user's to fix; anything else is damage.
  const auto record = nlohmann::json::parse(m.scheme, nullptr, /*allow_exceptions=*/false);
  if (s.status().code() == ErrorCode::kInvalidArgument && record.is_object() &&
      record.contains("kernel")) {
    return s.status().with_context("the grid's scheme");
  }
  return corrupt("the grid's own scheme does not parse: " + s.status().message());
}

std::string scheme_to_record(const std::string& recorded, const Scheme& ran) {
  return kernel_pin_of(recorded) && ran.kernel() ? ran.to_json() : recorded;
}

Status check_run(const Manifest& m, const RunOptions& opt) {
  if (opt.steps < 0) {
    return invalid_argument("--steps is " + std::to_string(opt.steps) +
                            "; give a number of steps >= 0");
  }
  if (opt.flush_subnormals && !internal::can_flush_subnormals()) {
    return unsupported(
        "--flush-subnormals needs x86 or AArch64, which this build is not for; leave it out");
  }
  DG_ASSIGN_OR_RETURN(const Scheme st, scheme_for(m, opt.scheme));
  DG_RETURN_IF_ERROR(check_components(m, st));
  DG_RETURN_IF_ERROR(st.check_dtype(m.dtype));
  const Shape& s = m.shape;
  struct Axis {
    const char* name;
    int r;
    int64_t n;
  } axes[] = {{"x", st.radius_x(), s.nx}, {"y", st.radius_y(), s.ny}, {"z", st.radius_z(), s.nz}};
  for (const Axis& a : axes) {
    if (a.r > a.n) {
      return invalid_argument((st.is_stencil() ? "stencil " : "scheme ") + st.name() + " reaches " +
                              std::to_string(a.r) + " points along " + a.name +
                              " but the grid has only " + std::to_string(a.n) +
                              "; use a smaller stencil or a larger grid");
    }
  }
  return Status::Ok();
}

void describe_problem(RunReport* r, const Shape& shape, DType dtype, const RunOptions& opt) {
  r->stencil = opt.scheme.name();
  r->stencil_points = opt.scheme.points();
  r->flops_per_update = opt.scheme.flops_per_update();
  r->shape = shape.to_string();
  r->dtype = std::string(dtype_name(dtype));
  r->boundary = opt.boundary.to_string();
  r->flush_subnormals = opt.flush_subnormals;
  r->points = shape.points();
}

RunRecord record_of(const RunOptions& opt, int64_t step, Method method) {
  RunRecord r;
  r.step_from = step;
  r.step_to = step + opt.steps;
  r.stencil = opt.scheme.to_json();
  r.boundary = opt.boundary.to_string();
  r.method = std::string(method_name(method));
  r.flush_subnormals = opt.flush_subnormals;
  r.started = utc_now();
  return r;
}

bool repeats(const RunRecord& run, const RunOptions& opt) {
  return opt.steps == run.step_to - run.step_from &&
         json_equal(run.stencil, opt.scheme.to_json()) &&
         run.boundary == opt.boundary.to_string() && run.flush_subnormals == opt.flush_subnormals;
}

Result<RunOptions> rest_of(const RunRecord& run, int64_t step, RunOptions opt) {
  DG_ASSIGN_OR_RETURN(opt.scheme, Scheme::from_grid_record(run.stencil));
  DG_ASSIGN_OR_RETURN(opt.boundary, parse_boundary(run.boundary));
  DG_ASSIGN_OR_RETURN(const Method m, parse_method(run.method));
  if (opt.method == Method::kAuto) opt.method = m;
  opt.flush_subnormals = run.flush_subnormals;
  opt.steps = run.step_to - step;
  return opt;
}

Result<RunToDo> decide_run(const Manifest& whole, const RunStart& at, RunOptions opt) {
  if (!opt.resume) {  // (resuming, the recorded run's scheme replaces it)
    DG_ASSIGN_OR_RETURN(opt.scheme, scheme_for(whole, opt.scheme));
  }
  if (at.recorded && (opt.resume || repeats(*at.recorded, opt))) {
    DG_ASSIGN_OR_RETURN(opt, rest_of(*at.recorded, at.step, std::move(opt)));
    return RunToDo{std::move(opt), *at.recorded, true};
  }
  if (opt.resume) {
    return invalid_argument("grid " + at.dir + " has no unfinished run to resume (it is at step " +
                            std::to_string(at.step) + "); give --steps to start one");
  }
  if (at.stopped_part_way && at.recorded) {
    return invalid_argument("grid " + at.dir + " holds " + at.recorded->describe() + ", " +
                            at.stopped_how + "; finish it first with '" + at.resume_command + "'");
  }
  RunRecord record = record_of(opt, at.step, opt.method);
  return RunToDo{std::move(opt), std::move(record), false};
}

Traces traces_of_run(const RunRecord& run, int64_t receivers, int64_t held_steps, int64_t held_from,
                     bool resumed, const std::string& path) {
  Traces t = run_traces(run.step_from, run.step_to, receivers, held_steps, held_from + 1);
  if (resumed) load_held_rows(&t, path);
  return t;
}

HistoryEntry run_history(const RunOptions& opt, int64_t step_from, int64_t step_to, bool resumed,
                         nlohmann::json extra) {
  nlohmann::json details = std::move(extra);
  details["stencil"] = nlohmann::json::parse(opt.scheme.to_json());
  details["boundary"] = opt.boundary.to_string();
  details["steps"] = step_to - step_from;
  details["step_from"] = step_from;
  details["step_to"] = step_to;
  if (resumed) details["resumed"] = true;
  return {utc_now(), "run", details.dump()};
}

namespace {

std::string run_record_path(const std::string& dir) {
  return internal::join_path(dir, kRunRecordName);
}

}  // namespace

std::optional<RunRecord> read_run_record(const std::string& dir, int64_t step) {
  auto text = internal::read_own_file(run_record_path(dir));
  if (!text.ok()) return std::nullopt;
  auto r = RunRecord::from_json(*text);
  if (!r.ok() || step < r->step_from || step > r->step_to) return std::nullopt;
  return std::move(r).value();
}

Status save_run_record(const std::string& dir, const RunRecord& record) {
  return internal::write_file_atomic(dir, kRunRecordName, record.to_json());
}

void drop_run_record(const std::string& dir) { ::unlink(run_record_path(dir).c_str()); }

Result<Grid> open_to_split(const std::string& dir, const std::string& new_dir) {
  std::error_code ec;
  if (internal::absolute_path(dir) == internal::absolute_path(new_dir) ||
      std::filesystem::equivalent(dir, new_dir, ec)) {
    return invalid_argument(new_dir + " is the grid to split; give a new directory for the " +
                            "split grid (" + dir + " stays as it is)");
  }
  if (is_distributed_grid(dir)) {
    auto m = read_distributed_manifest(dir);
    const std::string over =
        m.ok() ? " (over " + std::to_string(m->ranks()) + (m->ranks() == 1 ? " rank)" : " ranks)")
               : "";
    return invalid_argument(dir + " is a distributed grid already" + over +
                            "; run it under mpirun as it is ('mpirun -n P deepgrid run " + dir +
                            "' splits it again over P ranks)");
  }
  DG_ASSIGN_OR_RETURN(Grid g, Grid::open(dir));
  const std::optional<RunRecord> run = unfinished_run(g);
  if (run || !g.interrupted_sweep().empty()) {
    return invalid_argument(
        dir + " has an unfinished run" +
        (run ? " (" + run->describe() + ")" : " (" + g.interrupted_sweep() + ")") +
        "; finish it with 'deepgrid run " + dir + " --resume' before splitting the grid");
  }
  return g;
}

namespace {

// Where a run's traces go as SEG-Y (empty: not as SEG-Y); `options` then record into the .npy
// beside it. Checks what can be checked before the grid is opened (resuming, the steps come
// from the record: checked again once decided).
Result<std::string> segy_destination(RunOptions* options) {
  if (options->traces_path.empty()) return std::string();
  DG_ASSIGN_OR_RETURN(const TracesFormat format, traces_format(options->traces_path));
  if (format != TracesFormat::kSegy) return std::string();
  const int64_t steps = options->resume ? 1 : options->steps;
  DG_RETURN_IF_ERROR(check_segy(options->segy, steps, options->probes, "--dt"));
  std::string segy = std::exchange(options->traces_path, traces_npy_path(options->traces_path));
  return segy;
}

// The SEG-Y file of a finished run's traces, from the .npy its receivers filled.
Status write_run_segy(const RunToDo& todo, const std::string& grid, const std::string& segy) {
  const RunOptions& opt = todo.options;
  SegyOptions o = opt.segy;
  o.grid = grid;
  o.first_step = todo.record.step_from + 1;
  return write_traces_segy(opt.traces_path, opt.probes, segy, o)
      .with_context("the run finished and its traces are in " + opt.traces_path +
                    ", from which 'deepgrid traces' can write " + segy);
}

}  // namespace

Result<RunEnd> run_lifecycle(RunDriver& driver, RunOptions given) {
  DG_ASSIGN_OR_RETURN(const std::string segy, segy_destination(&given));
  DG_ASSIGN_OR_RETURN(const RunStart at, driver.open(given));
  auto decided = decide_run(driver.whole(), at, std::move(given));
  DG_RETURN_IF_ERROR(driver.agree(decided.status()));
  RunEnd end{std::move(decided).value()};
  RunToDo& todo = end.todo;
  if (!segy.empty()) {  // (the same on every process)
    DG_RETURN_IF_ERROR(check_segy(todo.options.segy, todo.record.step_to - todo.record.step_from,
                                  todo.options.probes, "--dt"));
  }
  DG_RETURN_IF_ERROR(driver.check(todo));
  DG_RETURN_IF_ERROR(driver.prepare(todo));
  if (todo.resumed) {  // (the record that brought us here stays until the run is done)
    DG_ASSIGN_OR_RETURN(const bool going_on, driver.resume(todo));
    if (!going_on) return end;  // the records stay
  } else {
    DG_RETURN_IF_ERROR(driver.record(todo));
  }
  DG_ASSIGN_OR_RETURN(const Advanced advanced, driver.advance(todo));
  if (!advanced.commit) return end;  // the records stay
  DG_RETURN_IF_ERROR(driver.commit(advanced.to,
                                   scheme_to_record(driver.whole().scheme, todo.options.scheme),
                                   run_history(todo.options, advanced.from, advanced.to,
                                               todo.resumed, driver.history_details())));
  end.committed = true;
  end.finished = advanced.to == todo.record.step_to;
  if (end.finished) driver.drop_record();  // else resumable
  if (end.finished && !segy.empty()) {
    DG_RETURN_IF_ERROR(
        driver.agree(driver.writes_traces() ? write_run_segy(todo, at.dir, segy) : Status::Ok()));
  }
  return end;
}

}  // namespace deepgrid
