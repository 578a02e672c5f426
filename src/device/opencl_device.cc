// The OpenCL backend of device.h, through the ICD loader (libOpenCL): OpenCL 1.2's API, which
// every vendor's driver and PoCL provide.
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <CL/cl_ext.h>  // CL_PLATFORM_NOT_FOUND_KHR

#include <algorithm>
#include <map>
#include <mutex>
#include <new>
#include <utility>

#include "deepgrid/geometry.h"
#include "device/device.h"

namespace deepgrid::device {
namespace {

// The names of the error codes a run can meet; others by number.
const char* cl_error_name(cl_int e) {
  switch (e) {
    case CL_DEVICE_NOT_FOUND:
      return "CL_DEVICE_NOT_FOUND";
    case CL_DEVICE_NOT_AVAILABLE:
      return "CL_DEVICE_NOT_AVAILABLE";
    case CL_MEM_OBJECT_ALLOCATION_FAILURE:
      return "CL_MEM_OBJECT_ALLOCATION_FAILURE";
    case CL_OUT_OF_RESOURCES:
      return "CL_OUT_OF_RESOURCES";
    case CL_OUT_OF_HOST_MEMORY:
      return "CL_OUT_OF_HOST_MEMORY";
    case CL_BUILD_PROGRAM_FAILURE:
      return "CL_BUILD_PROGRAM_FAILURE";
    case CL_INVALID_VALUE:
      return "CL_INVALID_VALUE";
    case CL_INVALID_BUFFER_SIZE:
      return "CL_INVALID_BUFFER_SIZE";
    case CL_INVALID_KERNEL_ARGS:
      return "CL_INVALID_KERNEL_ARGS";
    case CL_INVALID_WORK_GROUP_SIZE:
      return "CL_INVALID_WORK_GROUP_SIZE";
    case CL_INVALID_GLOBAL_WORK_SIZE:
      return "CL_INVALID_GLOBAL_WORK_SIZE";
    case CL_PLATFORM_NOT_FOUND_KHR:
      return "CL_PLATFORM_NOT_FOUND_KHR";
    default:
      return nullptr;
  }
}

Status cl_status(cl_int e, std::string_view call) {
  const char* name = cl_error_name(e);
  const ErrorCode code = e == CL_MEM_OBJECT_ALLOCATION_FAILURE || e == CL_OUT_OF_RESOURCES ||
                                 e == CL_OUT_OF_HOST_MEMORY
                             ? ErrorCode::kResource
                             : ErrorCode::kIo;
  return {code, "OpenCL: " + std::string(call) + " failed: " +
                    (name != nullptr ? std::string(name) + " (" + std::to_string(e) + ")"
                                     : "error " + std::to_string(e))};
}

#define DG_CL(call, name)                                           \
  if (const cl_int dg_cl_error = (call); dg_cl_error != CL_SUCCESS) \
  return cl_status(dg_cl_error, name)

// A string property of an OpenCL object (`get` is clGetDeviceInfo or clGetPlatformInfo).
template <typename Object, typename Name>
std::string info_string(cl_int (*get)(Object, Name, size_t, void*, size_t*), Object o, Name what) {
  size_t n = 0;
  if (get(o, what, 0, nullptr, &n) != CL_SUCCESS || n == 0) return {};
  std::string s(n, '\0');
  get(o, what, n, s.data(), nullptr);
  s.resize(s.find('\0'));
  return s;
}
std::string device_string(cl_device_id d, cl_device_info what) {
  return info_string(clGetDeviceInfo, d, what);
}
std::string platform_string(cl_platform_id p, cl_platform_info what) {
  return info_string(clGetPlatformInfo, p, what);
}

template <typename V>
V device_value(cl_device_id d, cl_device_info what) {
  V v{};
  clGetDeviceInfo(d, what, sizeof v, &v, nullptr);
  return v;
}

struct Found {
  std::vector<DeviceInfo> infos;
  std::vector<cl_device_id> ids;
};

Result<Found> find_devices() {
  cl_uint platforms = 0;
  const cl_int e = clGetPlatformIDs(0, nullptr, &platforms);
  Found found;
  // The ICD loader answers CL_PLATFORM_NOT_FOUND_KHR when no driver is installed.
  if (e == CL_PLATFORM_NOT_FOUND_KHR || (e == CL_SUCCESS && platforms == 0)) return found;
  DG_CL(e, "clGetPlatformIDs");
  std::vector<cl_platform_id> ps(platforms);
  DG_CL(clGetPlatformIDs(platforms, ps.data(), nullptr), "clGetPlatformIDs");
  for (cl_platform_id p : ps) {
    cl_uint n = 0;
    if (clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 0, nullptr, &n) != CL_SUCCESS) continue;
    std::vector<cl_device_id> ds(n);
    DG_CL(clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, n, ds.data(), nullptr), "clGetDeviceIDs");
    for (cl_device_id d : ds) {
      DeviceInfo info;
      info.index = static_cast<int>(found.infos.size());
      info.platform = platform_string(p, CL_PLATFORM_NAME);
      info.name = device_string(d, CL_DEVICE_NAME);
      info.vendor = device_string(d, CL_DEVICE_VENDOR);
      info.driver = device_string(d, CL_DRIVER_VERSION);
      info.version = device_string(d, CL_DEVICE_VERSION);
      info.gpu = (device_value<cl_device_type>(d, CL_DEVICE_TYPE) & CL_DEVICE_TYPE_GPU) != 0;
      info.fp64 = device_value<cl_device_fp_config>(d, CL_DEVICE_DOUBLE_FP_CONFIG) != 0;
      info.f32_subnormals =
          (device_value<cl_device_fp_config>(d, CL_DEVICE_SINGLE_FP_CONFIG) & CL_FP_DENORM) != 0;
      info.memory_bytes =
          static_cast<int64_t>(device_value<cl_ulong>(d, CL_DEVICE_GLOBAL_MEM_SIZE));
      info.max_buffer_bytes =
          static_cast<int64_t>(device_value<cl_ulong>(d, CL_DEVICE_MAX_MEM_ALLOC_SIZE));
      info.compute_units = static_cast<int>(device_value<cl_uint>(d, CL_DEVICE_MAX_COMPUTE_UNITS));
      found.infos.push_back(std::move(info));
      found.ids.push_back(d);
    }
  }
  return found;
}

void release_mem(void* m) { clReleaseMemObject(static_cast<cl_mem>(m)); }
void release_event(void* e) { clReleaseEvent(static_cast<cl_event>(e)); }
void release_kernel(void* k) { clReleaseKernel(static_cast<cl_kernel>(k)); }

}  // namespace

bool built_with_devices() { return true; }

Result<std::vector<DeviceInfo>> list_devices() {
  DG_ASSIGN_OR_RETURN(Found found, find_devices());
  return found.infos;
}

// The context of each device this process opens, and the programs built in it, kept for the
// process's life (never freed): a run that opens the device again (every run of a process that
// makes several: the Python package, the test suites) builds none of its programs again. PoCL
// preprocesses a program's source at every build, even one its cache of compiled kernels
// holds: that took 45% of the CPU time of a device case of the shared golden suite.
class SharedContext {
 public:
  static Result<SharedContext*> of(cl_device_id id) {
    static std::mutex mutex;
    static auto* const opened = new std::map<cl_device_id, SharedContext*>();
    const std::lock_guard lock(mutex);
    SharedContext*& slot = (*opened)[id];
    if (slot == nullptr) {
      cl_int e = CL_SUCCESS;
      cl_context context = clCreateContext(nullptr, 1, &id, nullptr, nullptr, &e);
      if (e != CL_SUCCESS) {
        opened->erase(id);
        return cl_status(e, "clCreateContext");
      }
      slot = new SharedContext(id, context);
    }
    return slot;
  }

  cl_context context() const { return context_; }

  // The program `source` built with `options`, built on first use; a failure is not kept.
  // Devices of several threads may ask at once.
  Result<cl_program> program(const std::string& source, const std::string& options) {
    const std::lock_guard lock(mutex_);
    const auto key = std::pair{source, options};
    if (const auto found = programs_.find(key); found != programs_.end()) return found->second;
    const char* text = source.c_str();
    const size_t length = source.size();
    cl_int e = CL_SUCCESS;
    cl_program p = clCreateProgramWithSource(context_, 1, &text, &length, &e);
    DG_CL(e, "clCreateProgramWithSource");
    e = clBuildProgram(p, 1, &id_, options.c_str(), nullptr, nullptr);
    if (e != CL_SUCCESS) {
      size_t n = 0;
      clGetProgramBuildInfo(p, id_, CL_PROGRAM_BUILD_LOG, 0, nullptr, &n);
      std::string log(n, '\0');
      clGetProgramBuildInfo(p, id_, CL_PROGRAM_BUILD_LOG, n, log.data(), nullptr);
      clReleaseProgram(p);
      const Status failed = cl_status(e, "clBuildProgram");
      return Status(failed.code(), failed.message() + "; build log:\n" + log.c_str());
    }
    programs_.emplace(key, p);
    return p;
  }

 private:
  SharedContext(cl_device_id id, cl_context context) : id_(id), context_(context) {}

  cl_device_id id_;
  cl_context context_;
  std::mutex mutex_;
  std::map<std::pair<std::string, std::string>, cl_program> programs_;
};

class Device::Impl {
 public:
  ~Impl() {
    if (queue_ != nullptr) clReleaseCommandQueue(queue_);
    for (cl_command_queue q : {up_, down_}) {
      if (q != nullptr) clReleaseCommandQueue(q);
    }
  }

  DeviceInfo info;
  int64_t budget = 0;
  // Shared with the buffers' deleters, which give their bytes back.
  std::shared_ptr<int64_t> allocated = std::make_shared<int64_t>(0);
  int64_t peak = 0;
  cl_device_id id_ = nullptr;
  SharedContext* shared_ = nullptr;
  cl_command_queue queue_ = nullptr;  // compute
  // Asynchronous copies, a queue each way: a GPU's copy engines move both at once.
  cl_command_queue up_ = nullptr, down_ = nullptr;
  std::vector<Event> transfers_;  // copies not yet timed (take_transfer_seconds)
};

Device::Device(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Device::Device(Device&&) noexcept = default;
Device& Device::operator=(Device&&) noexcept = default;
Device::~Device() = default;

const DeviceInfo& Device::info() const { return impl_->info; }
int64_t Device::budget() const { return impl_->budget; }
int64_t Device::allocated() const { return *impl_->allocated; }
int64_t Device::peak_allocated() const { return impl_->peak; }

Result<Device> Device::open(const DeviceInfo& info, int64_t budget) {
  DG_ASSIGN_OR_RETURN(Found found, find_devices());
  if (info.index < 0 || info.index >= static_cast<int>(found.ids.size()) ||
      found.infos[static_cast<size_t>(info.index)].name != info.name) {
    return invalid_argument("device " + std::to_string(info.index) + " (" + info.name +
                            ") is no longer there; see 'deepgrid devices'");
  }
  auto impl = std::make_unique<Impl>();
  impl->info = info;
  impl->budget = budget;
  impl->id_ = found.ids[static_cast<size_t>(info.index)];
  DG_ASSIGN_OR_RETURN(impl->shared_, SharedContext::of(impl->id_));
  cl_int e = CL_SUCCESS;
  impl->queue_ = clCreateCommandQueue(impl->shared_->context(), impl->id_, 0, &e);
  DG_CL(e, "clCreateCommandQueue");
  for (cl_command_queue* q : {&impl->up_, &impl->down_}) {
    *q = clCreateCommandQueue(impl->shared_->context(), impl->id_, CL_QUEUE_PROFILING_ENABLE, &e);
    DG_CL(e, "clCreateCommandQueue");
  }
  return Device(std::move(impl));
}

Result<Buffer> Device::allocate(int64_t bytes, std::string_view what) {
  Impl& d = *impl_;
  const int64_t held = *d.allocated;
  if (held + bytes > d.budget) {
    return Status(ErrorCode::kResource,
                  std::string(what) + " needs " + format_size(static_cast<uint64_t>(bytes)) +
                      " of device memory with " + format_size(static_cast<uint64_t>(held)) +
                      " held, over the device budget of " +
                      format_size(static_cast<uint64_t>(d.budget)) + "; raise --device-mem");
  }
  if (bytes > d.info.max_buffer_bytes) {
    return Status(ErrorCode::kResource,
                  std::string(what) + " needs one buffer of " +
                      format_size(static_cast<uint64_t>(bytes)) + " but " + d.info.name +
                      " allocates at most " +
                      format_size(static_cast<uint64_t>(d.info.max_buffer_bytes)));
  }
  cl_int e = CL_SUCCESS;
  cl_mem m = clCreateBuffer(d.shared_->context(), CL_MEM_READ_WRITE,
                            static_cast<size_t>(std::max<int64_t>(bytes, 1)), nullptr, &e);
  DG_CL(e, "clCreateBuffer");
  // Every bit set (NaN in either dtype): a kernel that reads values nobody wrote makes the
  // bitwise tests fail rather than pass on whatever the runtime left there.
  const cl_uchar all_set = 0xff;
  e = clEnqueueFillBuffer(d.queue_, m, &all_set, 1, 0,
                          static_cast<size_t>(std::max<int64_t>(bytes, 1)), 0, nullptr, nullptr);
  if (e == CL_SUCCESS) e = clFinish(d.queue_);  // done before the transfer queue's copies
  if (e != CL_SUCCESS) clReleaseMemObject(m);
  DG_CL(e, "clEnqueueFillBuffer");
  Buffer b;
  b.bytes_ = bytes;
  *d.allocated += bytes;
  d.peak = std::max(d.peak, *d.allocated);
  b.handle_ = std::shared_ptr<void>(m, [counter = d.allocated, bytes](void* p) {
    *counter -= bytes;
    release_mem(p);
  });
  return b;
}

Result<HostMemory> Device::host_memory(int64_t bytes) {
  Impl& d = *impl_;
  HostMemory h;
  h.bytes_ = bytes;
  const auto n = static_cast<size_t>(std::max<int64_t>(bytes, 1));
  cl_int e = CL_SUCCESS;
  cl_mem m = bytes <= d.info.max_buffer_bytes
                 ? clCreateBuffer(d.shared_->context(), CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR,
                                  n, nullptr, &e)
                 : nullptr;
  void* mapped = nullptr;
  if (m != nullptr && e == CL_SUCCESS) {
    mapped = clEnqueueMapBuffer(d.queue_, m, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0, n, 0, nullptr,
                                nullptr, &e);
  }
  if (mapped != nullptr && e == CL_SUCCESS) {
    cl_command_queue q = d.queue_;
    clRetainCommandQueue(q);
    h.handle_ = std::shared_ptr<void>(m, [q, mapped](void* p) {
      const auto mem = static_cast<cl_mem>(p);
      clEnqueueUnmapMemObject(q, mem, mapped, 0, nullptr, nullptr);
      clFinish(q);
      clReleaseMemObject(mem);
      clReleaseCommandQueue(q);
    });
    h.data_ = static_cast<std::byte*>(mapped);
    h.pinned_ = true;
    return h;
  }
  if (m != nullptr) clReleaseMemObject(m);  // (too large to pin, or refused: pageable)
  auto* plain = new (std::nothrow) std::byte[n];
  if (plain == nullptr) {
    return Status(ErrorCode::kResource,
                  "no host memory for " + format_size(static_cast<uint64_t>(bytes)));
  }
  h.handle_ = std::shared_ptr<void>(plain, [](void* p) { delete[] static_cast<std::byte*>(p); });
  h.data_ = plain;
  return h;
}

Result<Kernel> Device::kernel(const std::string& source, const std::string& options,
                              const std::string& name) {
  DG_ASSIGN_OR_RETURN(cl_program program, impl_->shared_->program(source, options));
  cl_int e = CL_SUCCESS;
  cl_kernel k = clCreateKernel(program, name.c_str(), &e);
  DG_CL(e, "clCreateKernel(" + name + ")");
  Kernel out;
  out.handle_ = std::shared_ptr<void>(k, release_kernel);
  out.name_ = name;
  return out;
}

Status Kernel::set(int index, const Buffer& buffer) {
  cl_mem m = static_cast<cl_mem>(buffer.handle_.get());
  DG_CL(clSetKernelArg(static_cast<cl_kernel>(handle_.get()), static_cast<cl_uint>(index), sizeof m,
                       &m),
        "clSetKernelArg(" + name_ + ", " + std::to_string(index) + ")");
  return Status::Ok();
}

namespace {
template <typename V>
Status set_value(void* kernel, const std::string& name, int index, V v) {
  DG_CL(clSetKernelArg(static_cast<cl_kernel>(kernel), static_cast<cl_uint>(index), sizeof v, &v),
        "clSetKernelArg(" + name + ", " + std::to_string(index) + ")");
  return Status::Ok();
}
}  // namespace

Status Kernel::set(int index, int32_t value) {
  return set_value(handle_.get(), name_, index, static_cast<cl_int>(value));
}
Status Kernel::set(int index, int64_t value) {
  return set_value(handle_.get(), name_, index, static_cast<cl_long>(value));
}
Status Kernel::set(int index, double value) {
  return set_value(handle_.get(), name_, index, static_cast<cl_double>(value));
}
Status Kernel::set(int index, float value) {
  return set_value(handle_.get(), name_, index, static_cast<cl_float>(value));
}

Status Device::write(const Buffer& to, int64_t offset, const void* from, int64_t bytes) {
  if (bytes == 0) return Status::Ok();
  DG_CL(clEnqueueWriteBuffer(impl_->queue_, static_cast<cl_mem>(to.handle_.get()), CL_TRUE,
                             static_cast<size_t>(offset), static_cast<size_t>(bytes), from, 0,
                             nullptr, nullptr),
        "clEnqueueWriteBuffer");
  return Status::Ok();
}

Status Device::read(const Buffer& from, int64_t offset, void* to, int64_t bytes) {
  if (bytes == 0) return Status::Ok();
  DG_CL(clEnqueueReadBuffer(impl_->queue_, static_cast<cl_mem>(from.handle_.get()), CL_TRUE,
                            static_cast<size_t>(offset), static_cast<size_t>(bytes), to, 0, nullptr,
                            nullptr),
        "clEnqueueReadBuffer");
  return Status::Ok();
}

namespace {

// The rectangle copies' arguments: the buffer's origin and the region, in bytes, rows, slices.
struct RowsInBuffer {
  size_t origin[3], host_origin[3] = {0, 0, 0}, region[3];
  explicit RowsInBuffer(const BufferRows& r)
      : origin{static_cast<size_t>(r.at), static_cast<size_t>(r.row), static_cast<size_t>(r.slice)},
        region{static_cast<size_t>(r.bytes), static_cast<size_t>(r.rows),
               static_cast<size_t>(r.slices)} {}
};

int64_t rows_bytes(const BufferRows& r) { return r.bytes * r.rows * r.slices; }

// Where rows that lie one after the other in the buffer start (a whole plane, or range()'s
// run), which one plain copy moves; -1 for a rectangle.
int64_t contiguous_at(const BufferRows& r) {
  const bool whole =
      r.bytes == r.row_pitch && (r.slices == 1 || r.rows * r.row_pitch == r.slice_pitch);
  return whole ? r.slice * r.slice_pitch + r.row * r.row_pitch + r.at : -1;
}

// `bytes` from `offset` as rows: one row, which contiguous_at() copies as a plain run.
BufferRows range(int64_t offset, int64_t bytes) {
  BufferRows r;
  r.at = offset;
  r.bytes = r.row_pitch = r.slice_pitch = bytes;
  r.rows = r.slices = 1;
  return r;
}

}  // namespace

Result<Event> Device::write_rows_async(const Buffer& to, const BufferRows& rows, const void* from,
                                       const std::vector<Event>& after) {
  // (OpenCL reads the host memory of a write: const in all but the shared signature.)
  return transfer(true, to, rows, const_cast<void*>(from), after);
}

Result<Event> Device::read_rows_async(const Buffer& from, const BufferRows& rows, void* to,
                                      const std::vector<Event>& after) {
  return transfer(false, from, rows, to, after);
}

Status Device::copy_rows(const Buffer& from, const Buffer& to, const BufferRows& rows) {
  if (rows_bytes(rows) == 0) return Status::Ok();
  if (const int64_t at = contiguous_at(rows); at >= 0) return copy(from, to, rows_bytes(rows), at);
  const RowsInBuffer r(rows);
  const auto row = static_cast<size_t>(rows.row_pitch),
             slice = static_cast<size_t>(rows.slice_pitch);
  DG_CL(clEnqueueCopyBufferRect(impl_->queue_, static_cast<cl_mem>(from.handle_.get()),
                                static_cast<cl_mem>(to.handle_.get()), r.origin, r.origin, r.region,
                                row, slice, row, slice, 0, nullptr, nullptr),
        "clEnqueueCopyBufferRect");
  return Status::Ok();
}

Status Device::copy(const Buffer& from, const Buffer& to, int64_t bytes, int64_t offset) {
  if (bytes == 0) return Status::Ok();
  const auto at = static_cast<size_t>(offset);
  DG_CL(clEnqueueCopyBuffer(impl_->queue_, static_cast<cl_mem>(from.handle_.get()),
                            static_cast<cl_mem>(to.handle_.get()), at, at,
                            static_cast<size_t>(bytes), 0, nullptr, nullptr),
        "clEnqueueCopyBuffer");
  return Status::Ok();
}

Status Device::launch(const Kernel& kernel, const Range& range) {
  if (range.items() <= 0) return Status::Ok();
  size_t offset[3], size[3], group[3];
  const bool grouped = range.group[0] > 0;
  for (size_t a = 0; a < 3; ++a) {
    offset[a] = static_cast<size_t>(range.offset[a]);
    group[a] = static_cast<size_t>(std::max<int64_t>(range.group[a], 1));
    size[a] = (static_cast<size_t>(range.size[a]) + group[a] - 1) / group[a] * group[a];
  }
  DG_CL(clEnqueueNDRangeKernel(impl_->queue_, static_cast<cl_kernel>(kernel.handle_.get()), 3,
                               offset, size, grouped ? group : nullptr, 0, nullptr, nullptr),
        "clEnqueueNDRangeKernel(" + kernel.name_ + ")");
  return Status::Ok();
}

Event Device::event(void* e) {
  Event ev;
  ev.handle_ = std::shared_ptr<void>(e, release_event);
  return ev;
}

Result<Event> Device::transfer(bool up, const Buffer& buffer, const BufferRows& rows, void* host,
                               const std::vector<Event>& after) {
  if (rows_bytes(rows) == 0) return Event();
  std::vector<cl_event> waits;
  for (const Event& e : after) {
    if (!e.empty()) waits.push_back(static_cast<cl_event>(e.handle_.get()));
  }
  const auto mem = static_cast<cl_mem>(buffer.handle_.get());
  cl_command_queue queue = up ? impl_->up_ : impl_->down_;
  const auto count = static_cast<cl_uint>(waits.size());
  const cl_event* list = waits.empty() ? nullptr : waits.data();
  cl_event done = nullptr;
  if (const int64_t at = contiguous_at(rows); at >= 0) {
    const auto offset = static_cast<size_t>(at), n = static_cast<size_t>(rows_bytes(rows));
    DG_CL(up ? clEnqueueWriteBuffer(queue, mem, CL_FALSE, offset, n, host, count, list, &done)
             : clEnqueueReadBuffer(queue, mem, CL_FALSE, offset, n, host, count, list, &done),
          up ? "clEnqueueWriteBuffer" : "clEnqueueReadBuffer");
  } else {
    const RowsInBuffer r(rows);
    const auto row = static_cast<size_t>(rows.row_pitch),
               slice = static_cast<size_t>(rows.slice_pitch);
    const size_t host_row = r.region[0], host_slice = r.region[0] * r.region[1];
    DG_CL(up ? clEnqueueWriteBufferRect(queue, mem, CL_FALSE, r.origin, r.host_origin, r.region,
                                        row, slice, host_row, host_slice, host, count, list, &done)
             : clEnqueueReadBufferRect(queue, mem, CL_FALSE, r.origin, r.host_origin, r.region, row,
                                       slice, host_row, host_slice, host, count, list, &done),
          up ? "clEnqueueWriteBufferRect" : "clEnqueueReadBufferRect");
  }
  impl_->transfers_.push_back(event(done));
  return impl_->transfers_.back();
}

Result<Event> Device::write_async(const Buffer& to, int64_t offset, const void* from, int64_t bytes,
                                  const std::vector<Event>& after) {
  return write_rows_async(to, range(offset, bytes), from, after);
}

Result<Event> Device::read_async(const Buffer& from, int64_t offset, void* to, int64_t bytes,
                                 const std::vector<Event>& after) {
  return read_rows_async(from, range(offset, bytes), to, after);
}

Result<double> Device::take_transfer_seconds() {
  double seconds = 0;
  for (const Event& e : impl_->transfers_) {
    DG_RETURN_IF_ERROR(wait(e));
    cl_ulong start = 0, end = 0;
    const auto ev = static_cast<cl_event>(e.handle_.get());
    DG_CL(clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_START, sizeof start, &start, nullptr),
          "clGetEventProfilingInfo");
    DG_CL(clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_END, sizeof end, &end, nullptr),
          "clGetEventProfilingInfo");
    seconds += static_cast<double>(end - start) * 1e-9;
  }
  impl_->transfers_.clear();
  return seconds;
}

Status Device::compute_after(const Event& e) {
  if (e.empty()) return Status::Ok();
  cl_event wait = static_cast<cl_event>(e.handle_.get());
  DG_CL(clEnqueueBarrierWithWaitList(impl_->queue_, 1, &wait, nullptr),
        "clEnqueueBarrierWithWaitList");
  return Status::Ok();
}

Result<Event> Device::compute_done() {
  cl_event done = nullptr;
  DG_CL(clEnqueueMarkerWithWaitList(impl_->queue_, 0, nullptr, &done),
        "clEnqueueMarkerWithWaitList");
  return event(done);
}

Status Device::wait(const Event& e) {
  if (e.empty()) return Status::Ok();
  cl_event wait = static_cast<cl_event>(e.handle_.get());
  DG_CL(clWaitForEvents(1, &wait), "clWaitForEvents");
  return Status::Ok();
}

Status Device::finish() {
  DG_CL(clFinish(impl_->queue_), "clFinish");
  DG_CL(clFinish(impl_->up_), "clFinish");
  DG_CL(clFinish(impl_->down_), "clFinish");
  return Status::Ok();
}

}  // namespace deepgrid::device
