// internal: the accelerator layer. Devices, their memory and the kernels that run on them,
// behind one interface: OpenCL today (opencl_device.cc, through the ICD loader, so any
// vendor's driver and PoCL's CPU device), nothing in a build without OpenCL (no_device.cc).
// A CUDA or HIP backend would implement the same classes; the engines see only these.
//
// Device memory is accounted here, not by the runtime: PoCL does not enforce its reported
// size and aborts the process when the host's memory runs out, so every allocation is checked
// against the budget the device was opened with before it is asked for.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "deepgrid/status.h"

namespace deepgrid::device {

struct DeviceInfo {
  int index = 0;  // position in list_devices(): what --device ID names
  std::string platform, name, vendor, driver, version;
  bool gpu = false;
  bool fp64 = false;
  bool f32_subnormals = false;   // computes f32 subnormal numbers (CL_FP_DENORM), as IEEE says
  int64_t memory_bytes = 0;      // global memory
  int64_t max_buffer_bytes = 0;  // largest single allocation
  int compute_units = 0;
  std::string describe() const;  // "0: NVIDIA H100 (gpu, 79.1 GiB, fp64; NVIDIA CUDA, driver 550)"
  std::string to_json() const;
};

// Whether this build can run on devices (it was built with OpenCL).
bool built_with_devices();

// Every device of every platform, in a stable order; empty when no platform is installed (or
// the build has none). An error only when a runtime that is there fails.
Result<std::vector<DeviceInfo>> list_devices();

// The device `which` names: an index into list_devices(), "gpu" (the first GPU), "cpu" (the
// first CPU device), or "" (the first GPU, else the first device). The error says what there
// is and how to choose.
Result<DeviceInfo> choose_device(std::string_view which);

// What a run may allocate on a device when --device-mem does not say: its memory less 1/16
// (the runtime's own buffers, other processes' contexts).
int64_t default_device_budget(const DeviceInfo& info);

class Device;

// Device memory, freed (and given back to the device's budget) when the last copy goes.
class Buffer {
 public:
  Buffer() = default;
  int64_t bytes() const { return bytes_; }
  bool empty() const { return handle_ == nullptr; }

 private:
  friend class Device;
  friend class Kernel;
  std::shared_ptr<void> handle_;  // the backend's object; its deleter releases it
  int64_t bytes_ = 0;
};

// Host memory for the device's copies: page-locked where the runtime gives it (mapped from a
// buffer it allocates in host memory), which a GPU reaches by DMA, where from pageable
// memory its driver stages every copy through buffers of its own (an H200: ~130 us a copy
// command); else ordinary memory. Counted against no device budget: it is the host's.
class HostMemory {
 public:
  HostMemory() = default;
  std::byte* data() const { return data_; }
  int64_t bytes() const { return bytes_; }
  bool pinned() const { return pinned_; }

 private:
  friend class Device;
  std::shared_ptr<void> handle_;  // its deleter unmaps and releases, or frees
  std::byte* data_ = nullptr;
  int64_t bytes_ = 0;
  bool pinned_ = false;
};

// A point in one of a device's queues: done once what was queued there before it is done.
class Event {
 public:
  Event() = default;
  bool empty() const { return handle_ == nullptr; }

 private:
  friend class Device;
  std::shared_ptr<void> handle_;
};

// A kernel of a built program, with its arguments set by position.
class Kernel {
 public:
  Kernel() = default;
  Status set(int index, const Buffer& buffer);
  Status set(int index, int32_t value);  // an `int` argument
  Status set(int index, int64_t value);  // a `long` argument
  Status set(int index, double value);   // a `double` argument
  Status set(int index, float value);    // a `float` argument

 private:
  friend class Device;
  std::shared_ptr<void> handle_;
  std::string name_;
};

// An x-y-z range of work items: `offset` (the first item's global id) and `size` items per
// axis, in work-groups of `group` items per axis (0: the runtime's choice). With groups, the
// launch rounds `size` up to whole groups: the kernel must skip the items past the range.
struct Range {
  std::array<int64_t, 3> offset{}, size{1, 1, 1}, group{};
  int64_t items() const { return size[0] * size[1] * size[2]; }
};

// Rows of a buffer seen as slices of rows: `slices` slices from slice `slice`, in each `rows`
// rows from row `row`, in each `bytes` bytes from byte `at`; rows of `row_pitch` bytes, slices
// of `slice_pitch` (a plane's x-y rectangle of every component: a slice per component). Host
// memory holds those rows packed, one after another.
struct BufferRows {
  int64_t at = 0, row = 0, slice = 0;
  int64_t bytes = 0, rows = 0, slices = 0;
  int64_t row_pitch = 0, slice_pitch = 0;
};

// A device opened for a run: in-order queues (compute: kernels and the copies below; transfer:
// the asynchronous copies beside it, one queue each way) and the bytes allocated against
// `budget`, in the device's context, which the process keeps with the programs built in it for
// every later run (a run builds no program an earlier one built). Calls are made from one
// thread; devices of several threads may be open at once.
class Device {
 public:
  static Result<Device> open(const DeviceInfo& info, int64_t budget);

  Device(Device&&) noexcept;
  Device& operator=(Device&&) noexcept;
  ~Device();

  const DeviceInfo& info() const;
  int64_t budget() const;
  int64_t allocated() const;  // bytes held by live buffers
  int64_t peak_allocated() const;

  // kResource, saying how much is held and how much the budget allows, when `bytes` more
  // would exceed the budget (or the device's largest allocation). A new buffer's bits are
  // all set (NaN).
  Result<Buffer> allocate(int64_t bytes, std::string_view what);

  // `bytes` of host memory, pinned where the runtime can (at most its largest buffer).
  Result<HostMemory> host_memory(int64_t bytes);

  // Builds OpenCL C `source` with `options` (build log in the error) and returns its kernel
  // `name`. A program is built once per device for the same source and options.
  Result<Kernel> kernel(const std::string& source, const std::string& options,
                        const std::string& name);

  // Copies between host memory and a buffer; they return when the copy is done.
  Status write(const Buffer& to, int64_t offset, const void* from, int64_t bytes);
  Status read(const Buffer& from, int64_t offset, void* to, int64_t bytes);
  // `rows` of `from` to the same place in `to`, on the compute queue (returns at once).
  Status copy_rows(const Buffer& from, const Buffer& to, const BufferRows& rows);
  // `bytes` from `offset` of `from` to the same place in `to`, on the compute queue (in order
  // with its kernels; returns at once).
  Status copy(const Buffer& from, const Buffer& to, int64_t bytes, int64_t offset = 0);

  // Queues `kernel` over `range` (work-group size left to the runtime); nothing when the
  // range is empty.
  Status launch(const Kernel& kernel, const Range& range);
  // Copies on the transfer queues, beside the compute queue's work: each starts once the
  // events `after` are done, returns at once with its own event, and needs its host memory
  // left alone until that event is done. Copies one way run in order; ordering against
  // kernels and copies the other way is the caller's, through events.
  Result<Event> write_async(const Buffer& to, int64_t offset, const void* from, int64_t bytes,
                            const std::vector<Event>& after = {});
  Result<Event> read_async(const Buffer& from, int64_t offset, void* to, int64_t bytes,
                           const std::vector<Event>& after = {});
  Result<Event> write_rows_async(const Buffer& to, const BufferRows& rows, const void* from,
                                 const std::vector<Event>& after = {});
  Result<Event> read_rows_async(const Buffer& from, const BufferRows& rows, void* to,
                                const std::vector<Event>& after = {});
  // What the compute queue queues from now on waits for `e` (nothing when empty).
  Status compute_after(const Event& e);
  // An event done once everything queued on the compute queue so far is done.
  Result<Event> compute_done();
  // Returns once `e` is done (at once when empty).
  Status wait(const Event& e);
  // The time the transfer queues' copies took on the device (its profiling clock; both ways
  // added) since the last call; waits for them.
  Result<double> take_transfer_seconds();

  // Waits until everything queued on every queue is done.
  Status finish();

  class Impl;

 private:
  explicit Device(std::unique_ptr<Impl> impl);
  // A copy of `rows` on a transfer queue (up: host to device), its event kept for
  // take_transfer_seconds().
  Result<Event> transfer(bool up, const Buffer& buffer, const BufferRows& rows, void* host,
                         const std::vector<Event>& after);
  static Event event(void* backend_event);  // takes over the backend's reference
  std::unique_ptr<Impl> impl_;
};

}  // namespace deepgrid::device
