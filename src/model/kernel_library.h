// A user's kernel library (deepgrid/kernel.h) loaded with dlopen: its description checked
// against what deepgrid can run, and its apply functions.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "deepgrid/dtype.h"
#include "deepgrid/kernel.h"
#include "deepgrid/scheme.h"
#include "deepgrid/status.h"

namespace deepgrid {

class KernelLibrary {
 public:
  // Loads the library at `path` and checks its description: one-line errors for a missing or
  // unloadable file, a library that is not a deepgrid kernel (dg_kernel_describe missing), an
  // ABI version other than DG_KERNEL_ABI_VERSION, a declared dtype whose apply function is
  // missing, a radius beyond DG_KERNEL_MAX_RADIUS, and invalid fields.
  //
  // Before anything is loaded the file's SHA-256 is computed and, when `expected_sha256` is
  // given (a grid's pin), must equal it; the file must lie in a directory DEEPGRID_KERNEL_DIRS
  // lists when that is set (kernel_dirs.h). After loading, the file mapped must be the one
  // hashed (the same inode), so that a swap in between is refused too.
  static Result<std::shared_ptr<const KernelLibrary>> open(const std::string& path,
                                                           const std::string& expected_sha256 = "");
  ~KernelLibrary();
  KernelLibrary(const KernelLibrary&) = delete;
  KernelLibrary& operator=(const KernelLibrary&) = delete;

  const std::string& path() const { return path_; }      // absolute
  const std::string& sha256() const { return sha256_; }  // of the file loaded, hex
  const std::string& name() const { return name_; }
  const std::vector<SchemeField>& fields() const { return fields_; }
  int radius_x() const { return info_->radius_x; }
  int radius_y() const { return info_->radius_y; }
  int radius_z() const { return info_->radius_z; }
  int flops_per_update() const { return info_->flops_per_update; }
  bool supports(DType dtype) const;
  // Ok, or the error that the library has no apply function for `dtype`.
  Status check_dtype(DType dtype) const;

  dg_kernel_apply_f32_fn apply_f32() const { return f32_; }
  dg_kernel_apply_f64_fn apply_f64() const { return f64_; }

 private:
  KernelLibrary() = default;
  Status load(const std::string& path, const std::string& expected_sha256);

  void* handle_ = nullptr;
  std::string path_;
  std::string sha256_;
  std::string name_;
  const dg_kernel_info* info_ = nullptr;
  std::vector<SchemeField> fields_;
  dg_kernel_apply_f32_fn f32_ = nullptr;
  dg_kernel_apply_f64_fn f64_ = nullptr;
};

}  // namespace deepgrid
