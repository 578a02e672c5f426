// A user's kernel library loaded: pinned by hash (kernel_pin.h), described and checked.
#include "model/kernel_library.h"

#include <dlfcn.h>

#include <algorithm>
#include <filesystem>

#include "deepgrid/stencil.h"
#include "model/kernel_pin.h"

namespace deepgrid {
namespace {

static_assert(DG_KERNEL_MAX_RADIUS == kMaxStencilRadius);

// The library's fields as scheme fields (Scheme validates names and levels as it does a
// JSON's).
Result<std::vector<SchemeField>> kernel_fields(const dg_kernel_info& info) {
  if (info.field_count < 1 || info.fields == nullptr) {
    return invalid_argument("declares no fields (dg_kernel_info.fields)");
  }
  std::vector<SchemeField> fields;
  int components = 0;
  for (int i = 0; i < info.field_count; ++i) {
    const dg_kernel_field& f = info.fields[i];
    if (f.name == nullptr) return invalid_argument("field " + std::to_string(i) + " has no name");
    if (f.coefficient != 0 && f.levels != 1) {  // a scheme JSON leaves them out; it cannot here
      return invalid_argument(std::string("coefficient field ") + f.name + " has " +
                              std::to_string(f.levels) + " levels; coefficient fields have 1");
    }
    fields.push_back(SchemeField{f.name, f.levels, f.coefficient != 0, f.value});
    components += std::clamp(f.levels, 1, kMaxFieldLevels);
  }
  if (components > DG_KERNEL_MAX_COMPONENTS) {
    return invalid_argument("declares " + std::to_string(components) + " components; at most " +
                            std::to_string(DG_KERNEL_MAX_COMPONENTS));
  }
  return fields;
}

}  // namespace

Result<std::shared_ptr<const KernelLibrary>> KernelLibrary::open(
    const std::string& path, const std::string& expected_sha256) {
  std::shared_ptr<KernelLibrary> lib(new KernelLibrary());
  DG_RETURN_IF_ERROR(lib->load(path, expected_sha256));
  return std::shared_ptr<const KernelLibrary>(std::move(lib));
}

Status KernelLibrary::load(const std::string& path, const std::string& expected_sha256) {
  std::error_code ec;
  path_ = std::filesystem::absolute(path, ec).lexically_normal().string();
  if (ec || !std::filesystem::is_regular_file(path_, ec)) {
    return invalid_argument("kernel library " + path +
                            " does not exist; build it (docs/kernels.md) or fix the path");
  }
  DG_ASSIGN_OR_RETURN(const internal::KernelFile file,
                      internal::open_kernel_file(path_, expected_sha256));
  sha256_ = file.sha256;
  handle_ = ::dlopen(path_.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle_ == nullptr) {
    return invalid_argument("cannot load kernel library " + path_ + ": " + ::dlerror());
  }
  DG_RETURN_IF_ERROR(internal::check_mapped(handle_, file, path_));
  auto symbol = [&](const char* name) { return ::dlsym(handle_, name); };
  auto describe = reinterpret_cast<dg_kernel_describe_fn>(symbol("dg_kernel_describe"));
  if (describe == nullptr) {
    return invalid_argument(path_ +
                            " is not a deepgrid kernel: it exports no dg_kernel_describe "
                            "(compile it against deepgrid/kernel.h, docs/kernels.md)");
  }
  info_ = describe();
  const std::string where = "kernel library " + path_;
  if (info_ == nullptr) return invalid_argument(where + ": dg_kernel_describe() returned NULL");
  if (info_->abi_version != DG_KERNEL_ABI_VERSION) {
    return invalid_argument(where + " was built for kernel ABI version " +
                            std::to_string(info_->abi_version) + ", this deepgrid runs version " +
                            std::to_string(DG_KERNEL_ABI_VERSION) +
                            "; rebuild it against this deepgrid's deepgrid/kernel.h");
  }
  name_ = info_->name != nullptr ? info_->name : std::filesystem::path(path_).stem().string();
  for (int r : {info_->radius_x, info_->radius_y, info_->radius_z}) {
    if (r < 0 || r > DG_KERNEL_MAX_RADIUS) {
      return invalid_argument(where + " declares radius " + std::to_string(r) +
                              "; radii must be 0 to " + std::to_string(DG_KERNEL_MAX_RADIUS));
    }
  }
  if ((info_->dtypes & (DG_KERNEL_F32 | DG_KERNEL_F64)) == 0) {
    return invalid_argument(where + " declares no dtype; set dtypes to DG_KERNEL_F32 and/or " +
                            "DG_KERNEL_F64");
  }
  if (info_->dtypes & DG_KERNEL_F32) {
    f32_ = reinterpret_cast<dg_kernel_apply_f32_fn>(symbol("dg_kernel_apply_f32"));
    if (f32_ == nullptr) {
      return invalid_argument(where + " declares f32 but exports no dg_kernel_apply_f32");
    }
  }
  if (info_->dtypes & DG_KERNEL_F64) {
    f64_ = reinterpret_cast<dg_kernel_apply_f64_fn>(symbol("dg_kernel_apply_f64"));
    if (f64_ == nullptr) {
      return invalid_argument(where + " declares f64 but exports no dg_kernel_apply_f64");
    }
  }
  auto fields = kernel_fields(*info_);
  if (!fields.ok()) return fields.status().with_context(where);
  fields_ = *std::move(fields);
  return Status::Ok();
}

KernelLibrary::~KernelLibrary() {
  if (handle_ != nullptr) ::dlclose(handle_);
}

bool KernelLibrary::supports(DType dtype) const {
  return dtype == DType::kF32 ? f32_ != nullptr : f64_ != nullptr;
}

Status KernelLibrary::check_dtype(DType dtype) const {
  if (supports(dtype)) return Status::Ok();
  return invalid_argument(
      "kernel " + name_ + " (" + path_ + ") has no " + std::string(dtype_name(dtype)) +
      " version; use a grid of dtype " +
      std::string(dtype_name(dtype == DType::kF32 ? DType::kF64 : DType::kF32)) +
      " or export dg_kernel_apply_" + std::string(dtype_name(dtype)));
}

}  // namespace deepgrid
