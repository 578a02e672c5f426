// Reading a distributed grid whole on rank 0: every global plane in order, assembled from the
// blocks the ranks send, and the parts' descriptions. With another number of ranks than parts,
// rank 0 reads every part itself.
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "mpi/comm.h"
#include "mpi/distributed_grid.h"
#include "mpi/parts.h"

namespace deepgrid::mpi {

using namespace detail;

namespace {

// A plane message to rank 0: an error code (0: values follow), then the block's x-y rectangle
// of one plane, or the error's message.
constexpr int kPlaneTag = 7;

// This rank's part: `held` when the caller holds it open (a run's), else opened to read into
// `opened`, verifying when asked to.
Result<const Grid*> own_part(const DistributedManifest& m, bool verify, const Grid* held,
                             std::optional<Grid>* opened) {
  if (held != nullptr) return held;
  DG_ASSIGN_OR_RETURN(Grid part, open_part(m, rank(), Grid::Mode::kReadOnly));
  if (verify) DG_RETURN_IF_ERROR(part.enable_verification());
  return &opened->emplace(std::move(part));
}

void send_blocks_to_root(const DistributedManifest& m, bool verify, const Grid* held) {
  const PartInfo& info = m.parts[static_cast<size_t>(rank())];
  std::vector<std::byte> msg(sizeof(int64_t) + global_format(m).rect_bytes(info.block));
  Status st = [&]() -> Status {
    std::optional<Grid> opened;
    DG_ASSIGN_OR_RETURN(const Grid* part, own_part(m, verify, held, &opened));
    return read_block_planes(*part, info, [&](int64_t, const std::byte* values) {
      std::memcpy(msg.data() + sizeof(int64_t), values, msg.size() - sizeof(int64_t));
      send(msg.data(), msg.size(), 0, kPlaneTag);
      return Status::Ok();
    });
  }();
  if (st.ok()) return;
  // The error ends this rank's stream; rank 0 shares it through agree().
  std::string err(sizeof(int64_t), '\0');
  const int64_t code = static_cast<int64_t>(st.code());
  std::memcpy(err.data(), &code, sizeof code);
  err += st.message();
  send(err.data(), err.size(), 0, kPlaneTag);
}

// Rank 0 takes rank r's rectangle of the next plane into `values`, or its error.
Status receive_block_plane(int r, std::vector<std::byte>* msg, std::byte* values) {
  receive(r, kPlaneTag, msg);
  int64_t code = 0;
  std::memcpy(&code, msg->data(), sizeof code);
  if (code != 0) {
    return Status(static_cast<ErrorCode>(code),
                  "rank " + std::to_string(r) + ": " +
                      std::string(reinterpret_cast<const char*>(msg->data()) + sizeof code,
                                  msg->size() - sizeof code));
  }
  std::memcpy(values, msg->data() + sizeof code, msg->size() - sizeof code);
  return Status::Ok();
}

// Rank 0 assembles every global plane from the ranks' rectangles (its own read from its part),
// z-layer of blocks after z-layer; after an error it still drains the other ranks' messages.
Status assemble_planes_on_root(const DistributedManifest& m, bool verify,
                               const io::PlaneConsumer& consume, const Grid* held) {
  const internal::PlaneFormat format = global_format(m);
  std::vector<std::byte> global(format.bytes());
  internal::ScratchPages plane;
  std::vector<std::byte> msg, values;
  std::vector<bool> failed(static_cast<size_t>(m.ranks()), false);
  Status first;
  std::optional<Grid> opened;
  const Result<const Grid*> own = own_part(m, verify, held, &opened);
  if (!own.ok()) first = own.status(), failed[0] = true;
  const int layer = m.procs.p[0] * m.procs.p[1];
  for (int lo = 0; lo < m.ranks(); lo += layer) {
    const Span zs = m.parts[static_cast<size_t>(lo)].block[kAxisZ];
    for (int64_t z = zs.lo; z < zs.hi; ++z) {
      for (int r = lo; r < lo + layer; ++r) {
        if (failed[static_cast<size_t>(r)]) continue;
        const PartInfo& info = m.parts[static_cast<size_t>(r)];
        values.resize(format.rect_bytes(info.block));
        const Status got = r == 0 ? read_rect(**own, z - info.origin(kAxisZ),
                                              info.to_local(info.block), &plane, values.data())
                                  : receive_block_plane(r, &msg, values.data());
        if (!got.ok()) {
          failed[static_cast<size_t>(r)] = true;
          if (first.ok()) first = got;
          continue;
        }
        internal::copy_rect(global.data(), format, info.block, values.data(),
                            internal::RectCopy::kFromPacked);
      }
      if (first.ok()) first = consume(z, global.data());
    }
  }
  return first;
}

}  // namespace

Status gather_planes(const DistributedManifest& m, bool verify, const io::PlaneConsumer& consume,
                     const Grid* held) {
  if (m.ranks() != size()) {  // rank 0 reads every part itself
    return agree(rank() == 0 ? read_distributed_planes(m, verify, consume) : Status::Ok());
  }
  if (rank() != 0) {
    send_blocks_to_root(m, verify, held);
    return agree(Status::Ok());
  }
  return agree(assemble_planes_on_root(m, verify, consume, held));
}

Status on_root_with_planes(const io::PlaneSource& gathered,
                           const std::function<Status(const io::PlaneSource&)>& work) {
  bool read = false;
  Status st;
  if (rank() == 0) {
    st = work([&](const io::PlaneConsumer& consume) {
      read = true;
      return gathered(consume);
    });
  }
  if (!read) {
    const Status fed = gathered([](int64_t, const void*) { return Status::Ok(); });
    if (st.ok()) st = fed;
  }
  return agree(st);
}

std::vector<std::string> describe_parts(const DistributedManifest& m) {
  if (m.ranks() != size()) {
    std::vector<std::string> out;
    if (rank() == 0) {
      for (int r = 0; r < m.ranks(); ++r) out.push_back(describe_part(m, r));
    }
    return out;
  }
  return all_gather(describe_part(m, rank()));
}

}  // namespace deepgrid::mpi
