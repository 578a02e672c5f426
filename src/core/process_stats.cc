#include "core/process_stats.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

namespace deepgrid {

uint64_t peak_resident_bytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmHWM:", 0) == 0) {
      return std::stoull(line.substr(6)) * 1024;  // reported in kB
    }
  }
  return 0;
}

double stolen_cpu_seconds(std::string_view proc_stat, long ticks_per_second) {
  // "cpu  user nice system idle iowait irq softirq steal ...", in clock ticks.
  std::istringstream in{std::string(proc_stat)};
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("cpu ", 0) != 0) continue;
    std::istringstream fields(line.substr(4));
    unsigned long long v[8] = {};
    for (unsigned long long& f : v) {
      if (!(fields >> f)) return 0;
    }
    return ticks_per_second > 0 ? static_cast<double>(v[7]) / static_cast<double>(ticks_per_second)
                                : 0;
  }
  return 0;
}

double stolen_cpu_seconds() {
  std::ifstream in("/proc/stat");
  std::stringstream text;
  text << in.rdbuf();
  return stolen_cpu_seconds(text.str(), ::sysconf(_SC_CLK_TCK));
}

}  // namespace deepgrid
