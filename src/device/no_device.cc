// device.h in a build without OpenCL: no devices; nothing can be opened.
#include "device/device.h"

namespace deepgrid::device {

namespace {
Status no_opencl() {
  return unsupported("this deepgrid was built without OpenCL, so it cannot run on devices");
}
}  // namespace

bool built_with_devices() { return false; }
Result<std::vector<DeviceInfo>> list_devices() { return std::vector<DeviceInfo>{}; }

class Device::Impl {};
Device::Device(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Device::Device(Device&&) noexcept = default;
Device& Device::operator=(Device&&) noexcept = default;
Device::~Device() = default;
Result<Device> Device::open(const DeviceInfo&, int64_t) { return no_opencl(); }
const DeviceInfo& Device::info() const {
  static const DeviceInfo none;
  return none;
}
int64_t Device::budget() const { return 0; }
int64_t Device::allocated() const { return 0; }
int64_t Device::peak_allocated() const { return 0; }
Result<Buffer> Device::allocate(int64_t, std::string_view) { return no_opencl(); }
Result<HostMemory> Device::host_memory(int64_t) { return no_opencl(); }
Result<Kernel> Device::kernel(const std::string&, const std::string&, const std::string&) {
  return no_opencl();
}
Status Device::write(const Buffer&, int64_t, const void*, int64_t) { return no_opencl(); }
Status Device::read(const Buffer&, int64_t, void*, int64_t) { return no_opencl(); }
Status Device::copy_rows(const Buffer&, const Buffer&, const BufferRows&) { return no_opencl(); }
Result<Event> Device::write_rows_async(const Buffer&, const BufferRows&, const void*,
                                       const std::vector<Event>&) {
  return no_opencl();
}
Result<Event> Device::read_rows_async(const Buffer&, const BufferRows&, void*,
                                      const std::vector<Event>&) {
  return no_opencl();
}
Status Device::copy(const Buffer&, const Buffer&, int64_t, int64_t) { return no_opencl(); }
Status Device::launch(const Kernel&, const Range&) { return no_opencl(); }
Result<Event> Device::write_async(const Buffer&, int64_t, const void*, int64_t,
                                  const std::vector<Event>&) {
  return no_opencl();
}
Result<Event> Device::read_async(const Buffer&, int64_t, void*, int64_t,
                                 const std::vector<Event>&) {
  return no_opencl();
}
Status Device::compute_after(const Event&) { return no_opencl(); }
Result<Event> Device::compute_done() { return no_opencl(); }
Status Device::wait(const Event&) { return no_opencl(); }
Result<double> Device::take_transfer_seconds() { return no_opencl(); }
Status Device::finish() { return no_opencl(); }
Status Kernel::set(int, const Buffer&) { return no_opencl(); }
Status Kernel::set(int, int32_t) { return no_opencl(); }
Status Kernel::set(int, int64_t) { return no_opencl(); }
Status Kernel::set(int, double) { return no_opencl(); }
Status Kernel::set(int, float) { return no_opencl(); }

}  // namespace deepgrid::device
