#include "mpi/halo_exchange.h"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <vector>

#include "internal/plane_rect.h"
#include "mpi/comm.h"

namespace deepgrid::mpi {
namespace {

// One plane's rectangle of a transfer, and the round it travels in.
struct Slice {
  int from_rank = 0, to_rank = 0;
  Block from, to;  // one plane each, in the sender's and the receiver's part
  size_t bytes = 0;
  int64_t round = 0;
};

// The transfers cut into one slice per plane, grouped into rounds in list order: a new round
// starts when a slice would take its sender's or receiver's buffers past `budget`.
std::vector<Slice> slices_in_rounds(const std::vector<BoxTransfer>& transfers, int ranks,
                                    const internal::PlaneFormat& format, uint64_t budget) {
  std::vector<Slice> out;
  std::vector<uint64_t> used(static_cast<size_t>(ranks), 0);
  int64_t round = 0;
  for (const BoxTransfer& t : transfers) {
    for (int64_t i = 0; i < t.from.size(kAxisZ); ++i) {
      Slice s{t.from_rank, t.to_rank, t.from, t.to, format.rect_bytes(t.from), 0};
      s.from[kAxisZ] = {t.from[kAxisZ].lo + i, t.from[kAxisZ].lo + i + 1};
      s.to[kAxisZ] = {t.to[kAxisZ].lo + i, t.to[kAxisZ].lo + i + 1};
      uint64_t& sender = used[static_cast<size_t>(s.from_rank)];
      uint64_t& receiver = used[static_cast<size_t>(s.to_rank)];
      if ((sender > 0 || receiver > 0) &&
          (sender + s.bytes > budget || receiver + s.bytes > budget)) {
        ++round;
        std::fill(used.begin(), used.end(), 0);
      }
      sender += s.bytes;
      receiver += s.bytes;
      s.round = round;
      out.push_back(s);
    }
  }
  return out;
}

// A rectangle of one plane of this rank's part and where its packed values are.
struct RectAt {
  Block rect;
  std::byte* packed = nullptr;
};

bool covers_plane(const Block& rect, const Shape& s) {
  return rect.size(kAxisX) == s.nx && rect.size(kAxisY) == s.ny;
}

// Moves the rectangles between the part and their packed values, reading each plane once (and,
// when putting values into the part, writing it once; a plane they cover whole is not read). The
// first error is kept in *first; the rest is skipped then, but the byte counts stay those of the
// work asked for.
void move_rects(Grid& part, std::vector<RectAt> rects, internal::RectCopy direction,
                std::vector<std::byte>* plane, ExchangeStats* stats, Status* first) {
  std::stable_sort(rects.begin(), rects.end(), [](const RectAt& a, const RectAt& b) {
    return a.rect[kAxisZ].lo < b.rect[kAxisZ].lo;
  });
  const internal::PlaneFormat format = internal::plane_format(part.manifest());
  const uint64_t plane_bytes = format.bytes();
  plane->resize(plane_bytes);
  for (size_t i = 0; i < rects.size();) {
    const int64_t p = rects[i].rect[kAxisZ].lo;
    size_t end = i;
    while (end < rects.size() && rects[end].rect[kAxisZ].lo == p) ++end;
    // A plane that receives values everywhere (a z halo) need not be read first.
    const bool whole =
        direction == internal::RectCopy::kFromPacked &&
        std::any_of(rects.begin() + static_cast<std::ptrdiff_t>(i),
                    rects.begin() + static_cast<std::ptrdiff_t>(end),
                    [&](const RectAt& r) { return covers_plane(r.rect, part.shape()); });
    if (!whole) {
      if (first->ok()) *first = part.read_planes(p, 1, plane->data());
      stats->bytes_read += plane_bytes;
    }
    for (; i < end; ++i) {
      internal::copy_rect(plane->data(), format, rects[i].rect, rects[i].packed, direction);
    }
    if (direction == internal::RectCopy::kToPacked) continue;
    if (first->ok()) *first = part.write_planes(p, 1, plane->data());
    stats->bytes_written += plane_bytes;
  }
}

}  // namespace

Result<ExchangeStats> exchange_halos(Grid& part, const std::vector<BoxTransfer>& transfers,
                                     uint64_t buffer_bytes) {
  const auto t0 = std::chrono::steady_clock::now();
  const int me = rank(), n = size();
  const internal::PlaneFormat format = internal::plane_format(part.manifest());
  // A slice (at most a plane) must fit one message, whose size MPI counts in an int.
  const bool plane_fits = format.bytes() <= INT_MAX;
  DG_RETURN_IF_ERROR(agree(plane_fits
                               ? Status::Ok()
                               : unsupported("planes over 2 GiB cannot be exchanged yet; use a "
                                             "smaller x-y extent or split x or y (--procs)")));
  // Every rank must cut the same rounds: the smallest budget any rank allows, and at most what
  // one MPI message of bytes can count.
  uint64_t budget = std::min<uint64_t>(buffer_bytes, INT_MAX);
  MPI_Allreduce(MPI_IN_PLACE, &budget, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
  const std::vector<Slice> all = slices_in_rounds(transfers, n, format, budget);
  std::vector<const Slice*> mine;
  for (const Slice& s : all) {
    if (s.from_rank == me || s.to_rank == me) mine.push_back(&s);
  }
  ExchangeStats stats;
  Status local;
  std::vector<std::byte> plane;
  std::vector<std::vector<std::byte>> sends(static_cast<size_t>(n)), recvs(static_cast<size_t>(n));
  const int64_t rounds = all.empty() ? 0 : all.back().round + 1;
  size_t next = 0;
  for (int64_t round = 0; round < rounds; ++round) {
    size_t end = next;
    while (end < mine.size() && mine[end]->round == round) ++end;
    for (int r = 0; r < n; ++r) {
      sends[static_cast<size_t>(r)].clear();
      recvs[static_cast<size_t>(r)].clear();
    }
    for (size_t i = next; i < end; ++i) {  // the buffers first: they must not move later
      const Slice& s = *mine[i];
      if (s.from_rank == me)
        sends[static_cast<size_t>(s.to_rank)].resize(sends[static_cast<size_t>(s.to_rank)].size() +
                                                     s.bytes);
      if (s.to_rank == me && s.from_rank != me)
        recvs[static_cast<size_t>(s.from_rank)].resize(
            recvs[static_cast<size_t>(s.from_rank)].size() + s.bytes);
    }
    std::vector<RectAt> to_send, to_receive;
    std::vector<size_t> send_at(static_cast<size_t>(n), 0), recv_at(static_cast<size_t>(n), 0);
    for (size_t i = next; i < end; ++i) {
      const Slice& s = *mine[i];
      if (s.from_rank == me) {
        size_t& at = send_at[static_cast<size_t>(s.to_rank)];
        to_send.push_back({s.from, sends[static_cast<size_t>(s.to_rank)].data() + at});
        at += s.bytes;
      }
      if (s.to_rank == me) {  // what a rank sends itself is put from its send buffer
        auto& in = s.from_rank == me ? sends : recvs;
        size_t& at = recv_at[static_cast<size_t>(s.from_rank)];
        to_receive.push_back({s.to, in[static_cast<size_t>(s.from_rank)].data() + at});
        at += s.bytes;
      }
    }
    next = end;
    move_rects(part, to_send, internal::RectCopy::kToPacked, &plane, &stats, &local);
    std::vector<MPI_Request> requests;
    for (int r = 0; r < n; ++r) {
      auto& in = recvs[static_cast<size_t>(r)];
      if (r == me || in.empty()) continue;
      requests.emplace_back();
      MPI_Irecv(in.data(), static_cast<int>(in.size()), MPI_BYTE, r, 0, MPI_COMM_WORLD,
                &requests.back());
    }
    for (int r = 0; r < n; ++r) {
      auto& out = sends[static_cast<size_t>(r)];
      if (r == me || out.empty()) continue;
      requests.emplace_back();
      MPI_Isend(out.data(), static_cast<int>(out.size()), MPI_BYTE, r, 0, MPI_COMM_WORLD,
                &requests.back());
      stats.bytes_sent += out.size();
    }
    MPI_Waitall(static_cast<int>(requests.size()), requests.data(), MPI_STATUSES_IGNORE);
    move_rects(part, to_receive, internal::RectCopy::kFromPacked, &plane, &stats, &local);
  }
  DG_RETURN_IF_ERROR(agree(local));
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return stats;
}

}  // namespace deepgrid::mpi
