// What the operating system says of this process and machine: peak memory, time stolen by a
// hypervisor, the build of the code running. Read by run reports (deepgrid/report.h) and by the
// machine profile (its disk rates, and the build its compute rates were measured with).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace deepgrid {

// The process's peak resident set size in bytes (VmHWM), 0 if unknown.
uint64_t peak_resident_bytes();

// CPU time the hypervisor has taken from this machine's CPUs since boot, summed over them: the
// steal field of /proc/stat's "cpu" line (0 on bare metal, or when unknown).
double stolen_cpu_seconds();
// The same from the text of /proc/stat, with `ticks_per_second` clock ticks per second; 0 when
// the text has no such field.
double stolen_cpu_seconds(std::string_view proc_stat, long ticks_per_second);

// The GNU build-id (ld --build-id) of the executable or shared library this code was linked
// into, in hex: it changes with the code. Empty when the object has none.
std::string code_build_id();

}  // namespace deepgrid
