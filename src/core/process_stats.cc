#include "core/process_stats.h"

#include <elf.h>
#include <link.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
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

namespace {

// A byte of this object's memory: finds the object among the loaded ones.
const char kThisObject = 0;

struct BuildIdSearch {
  uintptr_t address;
  std::string id;
};

// The hex of an NT_GNU_BUILD_ID note in the `size` bytes of notes at `notes`, or empty. Names
// and descriptors are padded to the segment's alignment: 4, or 8 for 8-aligned note segments.
std::string build_id_in_notes(const unsigned char* notes, size_t size, size_t align) {
  const size_t pad = align == 8 ? 7 : 3;
  size_t at = 0;
  while (at + sizeof(ElfW(Nhdr)) <= size) {
    ElfW(Nhdr) note;
    std::memcpy(&note, notes + at, sizeof note);
    const size_t name = at + sizeof note;
    const size_t desc = name + ((note.n_namesz + pad) & ~pad);
    const size_t next = desc + ((note.n_descsz + pad) & ~pad);
    if (next > size) break;
    if (note.n_type == NT_GNU_BUILD_ID && note.n_namesz == 4 &&
        std::memcmp(notes + name, "GNU", 4) == 0) {
      std::string hex;
      char byte[3];
      for (size_t i = 0; i < note.n_descsz; ++i) {
        std::snprintf(byte, sizeof byte, "%02x", notes[desc + i]);
        hex += byte;
      }
      return hex;
    }
    at = next;
  }
  return {};
}

int find_build_id(dl_phdr_info* info, size_t, void* data) {
  auto* search = static_cast<BuildIdSearch*>(data);
  bool here = false;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    const uintptr_t lo = info->dlpi_addr + ph.p_vaddr;
    here = here ||
           (ph.p_type == PT_LOAD && search->address >= lo && search->address < lo + ph.p_memsz);
  }
  if (!here) return 0;
  for (int i = 0; i < info->dlpi_phnum && search->id.empty(); ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_NOTE) continue;
    search->id =
        build_id_in_notes(reinterpret_cast<const unsigned char*>(info->dlpi_addr + ph.p_vaddr),
                          ph.p_memsz, ph.p_align);
  }
  return 1;  // this object: stop
}

}  // namespace

std::string code_build_id() {
  static const std::string id = [] {
    BuildIdSearch search{reinterpret_cast<uintptr_t>(&kThisObject), {}};
    dl_iterate_phdr(find_build_id, &search);
    return search.id;
  }();
  return id;
}

}  // namespace deepgrid
