#include "run/resident_grid.h"

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "deepgrid/box_io.h"
#include "deepgrid/plane_transfer.h"
#include "engines/incore_engine.h"
#include "store/plane_rect.h"

namespace deepgrid {

// The engine holding the grid (in-core of the grid's value type, or device), behind one
// interface.
class ResidentGrid::Engine {
 public:
  virtual ~Engine() = default;
  virtual Status load_plane(int64_t z, const std::byte* packed) = 0;
  virtual Status store_plane(int64_t z, std::byte* packed) = 0;
  virtual Result<int64_t> advance(const Boundary& boundary, int64_t steps,
                                  const ProgressFn& progress, ProbeRun probes,
                                  const LateHalos& late) = 0;
  // The report's threads, bt and tile (device: the device, its memory, the copies so far).
  virtual void describe(RunReport* r) const = 0;
  // Copies the values of `box` to or from `packed`, plane after plane, each plane's rectangle
  // as internal::copy_rect packs it (ResidentGrid::start_box_copy).
  virtual Result<CopyWait> start_box_copy(const Block& box, std::byte* packed,
                                          internal::RectCopy direction) = 0;
  virtual std::shared_ptr<std::byte> transfer_memory(size_t) { return nullptr; }
  // Faults in the memory that loading does not write, beside load_plane() (see load()).
  virtual void touch_beside_load() {}
  internal::PlaneFormat format;
};

namespace {

template <typename T>
class InCoreEngineOf final : public ResidentGrid::Engine {
 public:
  explicit InCoreEngineOf(InCoreEngine<T> engine) : engine_(std::move(engine)) {}
  Status load_plane(int64_t z, const std::byte* packed) override {
    engine_.load_plane(z, reinterpret_cast<const T*>(packed));
    return Status::Ok();
  }
  void touch_beside_load() override { engine_.touch_beside_load(); }
  Status store_plane(int64_t z, std::byte* packed) override {
    engine_.store_plane(z, reinterpret_cast<T*>(packed));
    return Status::Ok();
  }
  Result<int64_t> advance(const Boundary& boundary, int64_t steps, const ProgressFn& progress,
                          ProbeRun probes, const LateHalos& late) override {
    return engine_.advance(boundary, steps, progress, probes, late);
  }
  void describe(RunReport* r) const override {
    const WavefrontPlan& p = engine_.plan();
    r->threads = p.threads;
    r->bt = p.bt;
    r->tile = std::to_string(p.tile_x) + "x" + std::to_string(p.tile_y);
  }
  Result<ResidentGrid::CopyWait> start_box_copy(const Block& box, std::byte* packed,
                                                internal::RectCopy direction) override {
    const internal::PlaneLayout layout{static_cast<size_t>(engine_.stride()) * sizeof(T),
                                       static_cast<size_t>(engine_.field_stride()) * sizeof(T)};
    auto plane_at = [&](int64_t z) {
      // Only copies into the engine write its planes (which it then copies to its other grid).
      T* plane = direction == internal::RectCopy::kFromPacked
                     ? engine_.plane(z)
                     : const_cast<T*>(std::as_const(engine_).plane(z));
      return reinterpret_cast<std::byte*>(plane);
    };
    internal::copy_box(plane_at, layout, format, box, packed, direction);
    return ResidentGrid::CopyWait();
  }

 private:
  InCoreEngine<T> engine_;
};

class DeviceEngineOf final : public ResidentGrid::Engine {
 public:
  explicit DeviceEngineOf(DeviceEngine engine) : engine_(std::move(engine)) {}
  Status load_plane(int64_t z, const std::byte* packed) override {
    return engine_.load_plane(z, packed);
  }
  Status store_plane(int64_t z, std::byte* packed) override {
    return engine_.store_plane(z, packed);
  }
  Result<int64_t> advance(const Boundary& boundary, int64_t steps, const ProgressFn& progress,
                          ProbeRun probes, const LateHalos& late) override {
    return engine_.advance(boundary, steps, progress, probes, late);
  }
  void describe(RunReport* r) const override {
    const DevicePlan& plan = engine_.plan();
    // Device-resident: no temporal blocking; host-resident: steps per trip through the device.
    r->bt = plan.placement == DevicePlacement::kHostResident ? plan.pass_steps : 1;
    r->device = plan.device.name;
    r->device_placement = std::string(placement_name(plan.placement));
    r->device_memory = static_cast<uint64_t>(plan.device_bytes);
    r->device_bytes_copied = static_cast<uint64_t>(engine_.traffic().bytes);
    r->device_copy_seconds = engine_.traffic().copy_seconds;
  }
  Result<ResidentGrid::CopyWait> start_box_copy(const Block& box, std::byte* packed,
                                                internal::RectCopy direction) override {
    DG_ASSIGN_OR_RETURN(const device::Event copy, engine_.start_box_copy(box, packed, direction));
    if (copy.empty()) return ResidentGrid::CopyWait();
    return ResidentGrid::CopyWait([this, copy] { return engine_.finish_box_copy(copy); });
  }
  std::shared_ptr<std::byte> transfer_memory(size_t bytes) override {
    auto memory = engine_.host_memory(static_cast<int64_t>(bytes));
    if (!memory.ok() || !memory->pinned()) return nullptr;
    auto held = std::make_shared<device::HostMemory>(std::move(memory).value());
    return {held, held->data()};
  }

 private:
  DeviceEngine engine_;
};

template <typename T>
Result<std::unique_ptr<ResidentGrid::Engine>> make_incore_engine(const Grid& grid,
                                                                 const RunOptions& opt,
                                                                 const RunPlan& plan) {
  InCoreOptions io;
  io.threads = plan.incore.threads;
  io.bt = plan.incore.bt;
  io.tile_x = plan.incore.tile_x;
  io.tile_y = plan.incore.tile_y;
  io.flush_subnormals = plan.incore.flush_subnormals;
  if (plan.method == Method::kMmap) io.scratch_dir = grid.dir();
  io.touch_while_loading = io.scratch_dir.empty();  // (ResidentGrid::load)
  DG_ASSIGN_OR_RETURN(InCoreEngine<T> engine,
                      InCoreEngine<T>::create(grid.shape(), opt.scheme, opt.steps, io));
  return std::unique_ptr<ResidentGrid::Engine>(new InCoreEngineOf<T>(std::move(engine)));
}

Result<std::unique_ptr<ResidentGrid::Engine>> make_engine(const Grid& grid, const RunOptions& opt,
                                                          const RunPlan& plan) {
  if (plan.method == Method::kDevice) {
    DG_ASSIGN_OR_RETURN(DeviceEngine engine,
                        DeviceEngine::create(grid.shape(), opt.scheme, grid.dtype(), plan.device));
    return std::unique_ptr<ResidentGrid::Engine>(new DeviceEngineOf(std::move(engine)));
  }
  return dispatch_dtype(
      grid.dtype(), [&](auto tag) { return make_incore_engine<decltype(tag)>(grid, opt, plan); });
}

}  // namespace

ResidentGrid::ResidentGrid(RunPlan plan, std::unique_ptr<Engine> engine)
    : plan_(std::move(plan)), engine_(std::move(engine)) {}
ResidentGrid::ResidentGrid(ResidentGrid&&) noexcept = default;
ResidentGrid& ResidentGrid::operator=(ResidentGrid&&) noexcept = default;
ResidentGrid::~ResidentGrid() = default;

bool held_between_rounds(const RunPlan& plan) {
  return plan.method == Method::kInCore ||
         (plan.method == Method::kDevice && plan.device.placement != DevicePlacement::kThreeTiers);
}

Result<ResidentGrid> ResidentGrid::load(const Grid& grid, const RunOptions& opt, RunPlan plan) {
  const Shape& s = grid.shape();
  auto engine = make_engine(grid, opt, plan);
  DG_RETURN_IF_ERROR(engine.status());
  Engine& e = **engine;
  e.format = internal::plane_format(grid.manifest());
  // The first touch of the memory that loading does not write runs beside the reads (on a
  // virtual machine whose host backs fresh pages anew it can take longer than they do: a 1 GiB
  // grid's two copies took 5.9 s to fault in, its reads 1.2-1.7 s); the loaded copy's pages
  // are faulted in by the load itself.
  Status loaded;
#pragma omp parallel sections num_threads(2)
  {
#pragma omp section
    loaded = io::read_plane_range(grid, 0, s.nz, [&](int64_t z, const void* values) {
      return e.load_plane(z, static_cast<const std::byte*>(values));
    });
#pragma omp section
    e.touch_beside_load();
  }
  DG_RETURN_IF_ERROR(loaded);
  return ResidentGrid(std::move(plan), std::move(engine).value());
}

Result<RunReport> ResidentGrid::advance(const RunOptions& opt, int64_t step,
                                        const ResolvedProbes* probes, const LateHalos& late) {
  const auto t0 = std::chrono::steady_clock::now();
  double arrival = 0;  // seconds in late.arrive
  LateHalos timed{late.below, late.above, {}};
  if (late.arrive) {
    timed.arrive = [&] {
      const auto t = std::chrono::steady_clock::now();
      late.arrive();
      arrival = std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
    };
  }
  RunReport before;  // (the device's copies so far: its engine counts them from its load on)
  engine_->describe(&before);
  DG_ASSIGN_OR_RETURN(const int64_t done, engine_->advance(opt.boundary, opt.steps, opt.progress,
                                                           {probes, step, opt.placement}, timed));
  RunReport r;
  r.method = std::string(method_name(plan_.method));
  engine_->describe(&r);
  r.device_bytes_copied -= before.device_bytes_copied;
  r.device_copy_seconds -= before.device_copy_seconds;
  r.steps = done;
  // Compute: the advance less the halos' wait. Host-resident passes' copies between host and
  // device are in it: the report gives their transfer queues' time apart, but that time runs
  // beside the kernels where they overlap, so it cannot be taken out of the wall time.
  r.compute_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() - arrival;
  r.engine_memory = plan_.memory_bytes;
  return r;
}

void ResidentGrid::describe(RunReport* r) const { engine_->describe(r); }

Status ResidentGrid::read_box(const Block& box, std::byte* out) const {
  DG_ASSIGN_OR_RETURN(const CopyWait wait,
                      engine_->start_box_copy(box, out, internal::RectCopy::kToPacked));
  return wait ? wait() : Status::Ok();
}

std::shared_ptr<std::byte> ResidentGrid::transfer_memory(size_t bytes) const {
  return engine_->transfer_memory(bytes);
}

Status ResidentGrid::write_box(const Block& box, const std::byte* in) {
  // (kFromPacked only reads `packed`)
  DG_ASSIGN_OR_RETURN(const CopyWait wait, start_box_copy(box, const_cast<std::byte*>(in),
                                                          internal::RectCopy::kFromPacked));
  return wait ? wait() : Status::Ok();
}

Result<ResidentGrid::CopyWait> ResidentGrid::start_box_copy(const Block& box, std::byte* packed,
                                                            internal::RectCopy direction) {
  if (direction == internal::RectCopy::kFromPacked) boxes_written_ = true;
  return engine_->start_box_copy(box, packed, direction);
}

io::PlaneSource ResidentGrid::planes(const Shape& shape) const {
  return [this, shape](const io::PlaneConsumer& consume) {
    Block plane{{Span{0, shape.nx}, Span{0, shape.ny}, Span{0, 1}}};
    std::vector<std::byte> values(engine_->format.rect_bytes(plane));
    for (int64_t z = 0; z < shape.nz; ++z) {
      plane[kAxisZ] = Span{z, z + 1};
      DG_RETURN_IF_ERROR(read_box(plane, values.data()));
      DG_RETURN_IF_ERROR(consume(z, values.data()));
    }
    return Status::Ok();
  };
}

namespace {

// The coefficient components of plane z as `grid`'s coefficient files hold them, into their
// place in the packed plane `values`.
Status read_file_coefficients(const Grid& grid, int64_t z, std::byte* values) {
  const Manifest& m = grid.manifest();
  const Shape& s = m.shape;
  const int64_t component = s.plane_points() * static_cast<int64_t>(dtype_size(m.dtype));
  for (int c = m.components() - m.coef_components(); c < m.components(); ++c) {
    Box box = whole_grid_box(s);
    box.z = {z, 1, 1};
    box.component = c;
    DG_RETURN_IF_ERROR(read_box(grid, box, values + c * component));
  }
  return Status::Ok();
}

}  // namespace

Status ResidentGrid::write_replacement(Grid& grid) const {
  DG_RETURN_IF_ERROR(grid.create_replacement());
  const bool coefficients_from_files = boxes_written_ && grid.manifest().has_coef_files();
  return io::write_plane_range(
      grid, 0, grid.shape().nz,
      [&](int64_t z, void* values) {
        auto* plane = static_cast<std::byte*>(values);
        DG_RETURN_IF_ERROR(engine_->store_plane(z, plane));
        return coefficients_from_files ? read_file_coefficients(grid, z, plane) : Status::Ok();
      },
      io::kPlanesInFlight, FileSet::kReplacement);
}

}  // namespace deepgrid
