#include "mpi/halo_exchange.h"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <vector>

#include "mpi/comm.h"

namespace deepgrid::mpi {
namespace {

// One peer's planes for this rank, in the order both sides list them.
struct PeerPlanes {
  std::vector<int64_t> local;   // planes of this rank's part: read to send, or written
  std::vector<std::byte> data;  // one round's planes, packed
};

// The first error wins; later operations still run so that the rounds stay in step.
void keep_first(Status* first, const Status& st) {
  if (first->ok() && !st.ok()) *first = st;
}

}  // namespace

Result<ExchangeStats> exchange_halos(Grid& part, const std::vector<PlaneTransfer>& transfers,
                                     uint64_t buffer_bytes) {
  const auto t0 = std::chrono::steady_clock::now();
  const int me = rank(), n = size();
  const int64_t plane_bytes = part.manifest().layout.plane_bytes;
  if (plane_bytes > INT_MAX) {
    return agree(
        unsupported("planes over 2 GiB cannot be exchanged yet; use a smaller x-y extent"));
  }
  std::vector<PeerPlanes> sends(static_cast<size_t>(n)), recvs(static_cast<size_t>(n));
  for (const PlaneTransfer& t : transfers) {
    if (t.from_rank == me) sends[static_cast<size_t>(t.to_rank)].local.push_back(t.from_plane);
    if (t.to_rank == me) recvs[static_cast<size_t>(t.from_rank)].local.push_back(t.to_plane);
  }
  int64_t peers = 0, longest = 0;
  for (int r = 0; r < n; ++r) {
    const auto& s = sends[static_cast<size_t>(r)].local;
    const auto& v = recvs[static_cast<size_t>(r)].local;
    peers += static_cast<int64_t>(!s.empty()) + static_cast<int64_t>(!v.empty());
    longest = std::max({longest, static_cast<int64_t>(s.size()), static_cast<int64_t>(v.size())});
  }
  // Planes per peer and round. Every rank must use the same, or the messages of a round would
  // differ in size between sender and receiver: the smallest any rank's buffers allow.
  int64_t batch = std::clamp<int64_t>(
      static_cast<int64_t>(buffer_bytes) / std::max<int64_t>(1, peers * plane_bytes), 1, 64);
  MPI_Allreduce(MPI_IN_PLACE, &batch, 1, MPI_INT64_T, MPI_MIN, MPI_COMM_WORLD);
  for (int r = 0; r < n; ++r) {
    const auto size_for = [&](const PeerPlanes& p) {
      return static_cast<size_t>(std::min<int64_t>(batch, static_cast<int64_t>(p.local.size())) *
                                 plane_bytes);
    };
    sends[static_cast<size_t>(r)].data.resize(size_for(sends[static_cast<size_t>(r)]));
    if (r != me) recvs[static_cast<size_t>(r)].data.resize(size_for(recvs[static_cast<size_t>(r)]));
  }

  MPI_Datatype plane;
  MPI_Type_contiguous(static_cast<int>(plane_bytes), MPI_BYTE, &plane);
  MPI_Type_commit(&plane);
  ExchangeStats stats;
  Status local;
  const uint64_t pb = static_cast<uint64_t>(plane_bytes);
  for (int64_t first = 0; first < longest; first += batch) {
    // The planes [first, first + count) of a peer's list.
    const auto count_of = [&](const PeerPlanes& p) {
      return std::clamp<int64_t>(static_cast<int64_t>(p.local.size()) - first, 0, batch);
    };
    std::vector<MPI_Request> requests;
    for (int r = 0; r < n; ++r) {
      PeerPlanes& in = recvs[static_cast<size_t>(r)];
      const int64_t count = count_of(in);
      if (r == me || count == 0) continue;
      requests.emplace_back();
      MPI_Irecv(in.data.data(), static_cast<int>(count), plane, r, 0, MPI_COMM_WORLD,
                &requests.back());
    }
    for (int r = 0; r < n; ++r) {
      PeerPlanes& out = sends[static_cast<size_t>(r)];
      const int64_t count = count_of(out);
      for (int64_t i = 0; i < count; ++i) {
        std::byte* dst = out.data.data() + i * plane_bytes;
        if (local.ok()) keep_first(&local, part.read_planes(out.local[first + i], 1, dst));
        stats.bytes_read += pb;
      }
      if (r == me || count == 0) continue;
      requests.emplace_back();
      MPI_Isend(out.data.data(), static_cast<int>(count), plane, r, 0, MPI_COMM_WORLD,
                &requests.back());
      stats.bytes_sent += static_cast<uint64_t>(count) * pb;
    }
    MPI_Waitall(static_cast<int>(requests.size()), requests.data(), MPI_STATUSES_IGNORE);
    for (int r = 0; r < n; ++r) {
      // Planes sent to oneself are written from the send buffer.
      PeerPlanes& in = recvs[static_cast<size_t>(r)];
      const std::byte* data = (r == me ? sends[static_cast<size_t>(r)] : in).data.data();
      const int64_t count = count_of(in);
      for (int64_t i = 0; i < count; ++i) {
        if (local.ok())
          keep_first(&local, part.write_planes(in.local[first + i], 1, data + i * plane_bytes));
        stats.bytes_written += pb;
      }
    }
  }
  MPI_Type_free(&plane);
  DG_RETURN_IF_ERROR(agree(local));
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return stats;
}

}  // namespace deepgrid::mpi
