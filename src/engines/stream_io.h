// internal: a stream sweep's disk traffic, and what makes it durable and resumable.
//
// Reads run ahead of compute in the sweep's read order, writes behind it, through one
// io::BlockIo (io_uring or a thread pool) on aligned plane buffers (O_DIRECT where the files
// allow). New plane z goes to the slot `spare` places behind old plane z's (resume.h); writes
// complete in any order, and the committer (sweep_committer.h) makes their durable prefix
// durable in the background. Before a write would destroy an old plane that a resume from the
// durable prefix still needs, it waits. Checksums: the caller hashes each new plane before
// handing it over (write_plane records it); reads are verified as they are converted (by the
// caller, with the grid's verify_plane_hash). Periodic sweeps read their first old planes from
// the side file, which begin() fills before anything is overwritten.
//
// Called from one thread at a time (the sweep's master thread); the buffers' bytes are read and
// written by the whole team between the calls.
//
// Band mode (out-of-place sweeps, stream_bands.h): the planes are `height` rows of the grid's,
// from row r0 of a band; a sweep runs its bands one after the other, a begin() each. A read
// brings a band's rows (the 4096-byte blocks holding them: the plane's values start `lead`
// bytes into the buffer; a plane of several components holds each component's rows
// component_stride() bytes after the one before, so that one lead aligns them all), a write
// sends the band's own rows [y0, y1) of each component of a new plane to the same place in the
// replacement files, through the descriptors the band gives (O_DIRECT ones only when those rows
// start and end on 4096-byte boundaries), or where the bands share their edge blocks the whole
// blocks of edge_block_write (stream_bands.h). Reads run ahead from one
// band's planes into the next band's, and a band's last writes complete while the next band
// computes, so the disk does not idle between bands. No record, committer, write window or
// side file: nothing of the grid's own files is written.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/aligned_buffer.h"
#include "deepgrid/resume.h"
#include "deepgrid/status.h"
#include "deepgrid/store.h"
#include "engines/stream_engine.h"
#include "engines/sweep_committer.h"
#include "io/block_io.h"

namespace deepgrid::internal::stream {

// Bytes of a row of the grid's values.
int64_t row_bytes(const Manifest& m);

// Where the rows of a band's plane of `height` rows from row r0 lie: rows [a, a + before_end)
// of the grid's plane (a = r0 mod ny) and, where they wrap across the grid's ends, rows
// [0, after_start) after them; and where the plane starts in a buffer (`lead`), chosen so that
// one of the parts lies on block boundaries of the buffer as it does in the file (the larger,
// `aligned_after` when that is the second, where both cannot).
struct BandLayout {
  int64_t a = 0, before_end = 0, after_start = 0;
  bool aligned_after = false;
  size_t lead = 0;
};
BandLayout band_layout(const Manifest& m, int64_t height, int64_t r0);

// Band mode: a buffer for a band's plane of `height` rows (room for a lead of less than a block
// and, on planes of several components, band_component_span() bytes per component).
size_t band_buffer_bytes(const Manifest& m, int64_t height);
// At least a component's rows and two blocks, and as far modulo a block as one component is from
// the next in the files, so that the reads of every component align with one lead.
int64_t band_component_span(const Manifest& m, int64_t height);

class SweepIo {
 public:
  // An aligned plane buffer (a slice of the arena) for one read or write at a time.
  struct Buffer {
    std::byte* bytes = nullptr;
    size_t lead = 0;     // where the plane's values start (band mode)
    int64_t plane = -1;  // the plane it holds or is transferring
    bool busy = false;   // a request is in flight
    bool ready = false;  // read: data arrived
    int64_t length = 0;  // of the request in flight
    size_t band = 0;     // band mode: the band whose rows it holds
    int parts = 0;       // requests in flight for it (band mode: 1-3 per component)
    template <typename T>
    T* data() const {
      return reinterpret_cast<T*>(bytes + lead);
    }
  };

  // A band of an out-of-place sweep: its planes are rows [r0, r0 + height) of the grid's; it
  // writes rows [y0, y1) into `write_fds` (one per data file of the replacement).
  struct Band {
    int64_t y0 = 0, y1 = 0, r0 = 0;
    std::vector<int> write_fds;
    std::vector<std::string> write_paths;
    // The band's rows of every component are whole 4096-byte blocks in the files and in its
    // buffers (as O_DIRECT descriptors need): the last band's write then runs to the end of
    // the plane's last block.
    bool whole_blocks = false;
    // Rows that wrap across the grid's ends on planes not of whole blocks: descriptors of the
    // grid's files without O_DIRECT for the part of a read that cannot be aligned (and of its
    // coefficient files, where it has them).
    std::vector<int> buffered_read_fds;
    std::vector<int> buffered_coef_read_fds;
    // The first row the band computes: y0, or before it where the bands share their edge blocks
    // (`shares_edge_blocks`: bands_share_edge_blocks, stream_bands.h), whose writes are then
    // whole blocks through `write_fds` (edge_block_write).
    int64_t c0 = 0;
    bool shares_edge_blocks = false;
  };

  // `rz`: the stencil's z radius (the levels' reach, which the write window leaves alone).
  // `band_height` > 0: band mode, planes of that many rows. `writes_without_coefficients`:
  // write buffers of the ring's components alone (StreamPlan::writes_without_coefficients).
  SweepIo(Grid& grid, io::BlockIo& io, int rz, int64_t band_height = 0,
          bool writes_without_coefficients = false);

  // Plane buffers: `block` for reads, `writes` for writes (StreamPlan::write_buffers), in
  // `memory` where given (page-aligned, arena_bytes() bytes, kept by the caller until this is
  // destroyed: the device's pinned host memory), else in an arena of their own.
  Status allocate(int block, int64_t writes, std::byte* memory = nullptr);
  size_t arena_bytes(int block, int64_t writes) const;

  // Starts the sweep of `record` (kept until finish()), reading planes in `order`: opens (and,
  // for a new periodic sweep, fills) the side file, starts the committer, and records the
  // checksums of the planes a resumed sweep has done. On an error nothing is left open.
  // Band mode: starts the band set_band() named, each reading in `order` (the same for all
  // bands of a sweep); the first band's begin() starts the sweep.
  Status begin(const SweepRecord& record, std::vector<int64_t> order);
  // Band mode: the sweep's bands in the order they run (kept until its last band ends), and
  // the one the next begin() starts.
  void set_band(const std::vector<Band>* bands, size_t index) {
    bands_ = bands;
    band_index_ = index;
  }
  const Band& band() const { return (*bands_)[band_index_]; }
  bool last_band() const { return band_index_ + 1 == bands_->size(); }
  // Ends the sweep whose compute returned `st`: on an error waits out the requests in flight
  // (the kernel must not write into buffers about to be freed); then the committer's last
  // commit, and the side file closed. Returns the first error.
  Status finish(Status st);

  // Waits until level-0 plane p has been read, keeping the reads ahead going; the index of
  // the read buffer holding it.
  Result<size_t> await_read(int64_t p, StreamStats& stats);
  // The read buffers `used` (converted) take the next reads, which start now.
  Status recycle_reads(const std::vector<size_t>& used);
  // Starts reads of the next planes while read buffers are free, and submits what is queued.
  Status read_ahead();

  // An idle write buffer, claimed (busy) until write_plane() submits it.
  Result<size_t> claim_write_buffer(StreamStats& stats);
  // Writes new plane z from claimed buffer b once the write window allows; `hash`: its checksum.
  Status write_plane(size_t b, int64_t z, uint64_t hash, StreamStats& stats);
  // Waits until every write has completed.
  Status complete_writes(StreamStats& stats);

  const Buffer& read_buffer(size_t b) const { return reads_[b]; }
  const Buffer& write_buffer(size_t b) const { return writes_[b]; }
  // A read buffer's bytes (a whole plane's, or a band's), and a write buffer's.
  size_t buffer_bytes() const;
  size_t write_buffer_bytes() const;
  // Bytes of a plane's component in a buffer (of the whole plane, in whole-plane mode).
  size_t plane_bytes() const;
  // Bytes from one component of a plane in a buffer to the next.
  size_t component_stride() const;
  // Where component c of a plane starts in a read buffer: c component strides in, but for
  // whole planes whose coefficients all go to the sweep's window (writes without them), the
  // coefficients stay where their record put them (Layout::coef_at) instead of being moved
  // after the ring's part by the master thread.
  size_t component_at(int c) const;

 private:
  bool coefficients_in_record() const;
  Status pump_reads();
  // The sweep's reads: order_'s, once per band in band mode.
  size_t reads_total() const {
    return band_height_ > 0 ? order_.size() * bands_->size() : order_.size();
  }
  Result<size_t> idle_write_buffer(StreamStats& stats);
  Status submit(Buffer& buf, io::Op op, int64_t plane, size_t index);
  // A band's transfer: up to three requests per component.
  using BandRequests = std::vector<io::Request>;
  BandRequests band_requests(const Buffer& buf, bool write, int64_t plane);
  // A band's writes of a new plane where the bands share their edge blocks, from `buf`.
  void edge_block_requests(const Buffer& buf, int64_t plane, BandRequests& out);
  size_t band_lead(const Band& band) const;
  void begin_band(std::vector<int64_t> order);
  Status complete_one(StreamStats& stats);
  void drain();
  void note_written(int64_t z);
  int64_t window() const;
  Status wait_until_writable(int64_t z, StreamStats& stats);
  bool from_side_file(int64_t p) const { return side_fd_ >= 0 && p < side_planes_; }
  Status open_side_file(const SweepRecord& record);
  void close_side_file();

  Grid& grid_;
  const Manifest& m_;
  io::BlockIo& io_;
  const int rz_;
  const int64_t band_height_;  // 0: whole planes
  const bool writes_without_coefficients_;
  const std::vector<Band>* bands_ = nullptr;  // band mode: the sweep's bands
  size_t band_index_ = 0;                     // the band being swept
  // Bands sharing their edge blocks on planes of several components: for each plane, the first
  // bytes of each component after the first up to its first block boundary, as the first band
  // computed them; the last band writes them with the end of the component before.
  std::vector<std::byte> edge_heads_;
  std::vector<std::string> paths_;
  AlignedBuffer arena_;  // the buffers' memory
  std::vector<Buffer> reads_, writes_;
  std::vector<int64_t> order_;
  size_t next_read_ = 0;  // (band mode: counting through every band's order)
  // The sweep being run, and its durability (resume.h).
  const SweepRecord* record_ = nullptr;
  std::vector<uint64_t> new_hash_;  // checksums of the new planes
  std::vector<bool> written_;       // new planes whose write completed
  int64_t written_prefix_ = 0, requested_ = 0;
  std::unique_ptr<SweepCommitter> committer_;
  int side_fd_ = -1;
  int64_t side_planes_ = 0;
  std::string side_path_;
  static constexpr uint64_t kWriteTag = uint64_t{1} << 63;
};

}  // namespace deepgrid::internal::stream
