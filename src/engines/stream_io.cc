// The stream sweep's I/O pipeline (stream_io.h): reads ahead, writes behind within the window
// the durable prefix allows, the side file of periodic sweeps.
#include "engines/stream_io.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "core/file_util.h"
#include "core/stopwatch.h"
#include "engines/stream_bands.h"
#include "store/coef_request.h"

namespace deepgrid::internal::stream {

using Clock = std::chrono::steady_clock;

namespace {
constexpr int64_t kBlock = kDirectIoAlignment;

int64_t round_up(int64_t bytes) { return (bytes + kBlock - 1) / kBlock * kBlock; }

// Counts the disk waits of its scope (complete_one's, wait_durable's) as waits for writes.
class WaitForWrites {
 public:
  explicit WaitForWrites(StreamStats& stats) : stats_(stats), before_(stats.io_wait_seconds) {}
  ~WaitForWrites() { stats_.io_wait_for_writes_seconds += stats_.io_wait_seconds - before_; }
  WaitForWrites(const WaitForWrites&) = delete;
  WaitForWrites& operator=(const WaitForWrites&) = delete;

 private:
  StreamStats& stats_;
  double before_;
};
}  // namespace

SweepIo::SweepIo(Grid& grid, io::BlockIo& io, int rz, int64_t band_height,
                 bool writes_without_coefficients)
    : grid_(grid),
      m_(grid.manifest()),
      io_(io),
      rz_(rz),
      band_height_(band_height),
      writes_without_coefficients_(writes_without_coefficients) {
  for (size_t f = 0; f < m_.layout.files.size(); ++f) {
    paths_.push_back(grid.file_path(static_cast<int>(f)));
  }
}

size_t SweepIo::arena_bytes(int block, int64_t writes) const {
  return static_cast<size_t>(block) * buffer_bytes() +
         static_cast<size_t>(writes) * write_buffer_bytes();
}

Status SweepIo::allocate(int block, int64_t writes, std::byte* memory) {
  if (memory == nullptr) {
    arena_ = AlignedBuffer::on_huge_pages(arena_bytes(block, writes));
    if (!arena_.ok())
      return Status(ErrorCode::kResource, "out of memory for the stream engine's buffers");
    memory = arena_.data();
  }
  std::byte* next = memory;
  for (int i = 0; i < block; ++i, next += buffer_bytes()) reads_.push_back({next});
  for (int64_t i = 0; i < writes; ++i, next += write_buffer_bytes()) writes_.push_back({next});
  if (band_height_ > 0) return Status::Ok();
  new_hash_.assign(static_cast<size_t>(m_.shape.nz), 0);
  written_.assign(static_cast<size_t>(m_.shape.nz), false);
  committer_ = std::make_unique<SweepCommitter>(grid_, new_hash_);
  return Status::Ok();
}

int64_t row_bytes(const Manifest& m) {
  return m.shape.nx * static_cast<int64_t>(dtype_size(m.dtype));
}

int64_t band_component_span(const Manifest& m, int64_t height) {
  return round_up(height * row_bytes(m)) + 2 * kBlock + m.shape.ny * row_bytes(m) % kBlock;
}

// The last component's rows after the others' spans, a lead of less than a block before them
// and the block their read ends in after them; whole blocks (the buffers lie one after another).
size_t band_buffer_bytes(const Manifest& m, int64_t height) {
  const int c = m.components();
  return static_cast<size_t>(round_up((c - 1) * band_component_span(m, height) +
                                      round_up(height * row_bytes(m)) + (c > 1 ? 2 : 1) * kBlock));
}

size_t SweepIo::plane_bytes() const {
  return static_cast<size_t>(band_height_ > 0 ? band_height_ * row_bytes(m_)
                                              : m_.layout.plane_bytes);
}

size_t SweepIo::component_stride() const {
  return static_cast<size_t>(band_height_ > 0 ? band_component_span(m_, band_height_)
                                              : m_.layout.plane_bytes / m_.components());
}

// Whether whole-plane reads leave the coefficients in their record (component_at).
bool SweepIo::coefficients_in_record() const {
  return band_height_ == 0 && m_.has_coef_files() && writes_without_coefficients_;
}

size_t SweepIo::component_at(int c) const {
  const int state = m_.components() - m_.coef_components();
  if (c < state || !coefficients_in_record()) return static_cast<size_t>(c) * component_stride();
  return static_cast<size_t>(m_.layout.coef_at()) +
         static_cast<size_t>(c - state) * component_stride();
}

size_t SweepIo::buffer_bytes() const {
  return band_height_ > 0 ? band_buffer_bytes(m_, band_height_)
                          : static_cast<size_t>(m_.layout.plane_buffer_bytes());
}

size_t SweepIo::write_buffer_bytes() const {
  return writes_without_coefficients_ ? static_cast<size_t>(m_.layout.plane_stride)
                                      : buffer_bytes();
}

Status SweepIo::begin(const SweepRecord& record, std::vector<int64_t> order) {
  record_ = &record;
  if (band_height_ > 0) {
    begin_band(std::move(order));
    return Status::Ok();
  }
  order_ = std::move(order);
  next_read_ = 0;
  const Status opened = open_side_file(record);
  if (!opened.ok()) {
    close_side_file();
    return opened;
  }
  committer_->begin(record);
  const int64_t from = record.done;
  std::fill(new_hash_.begin(), new_hash_.end(), 0);
  std::copy(record.hashes.begin(), record.hashes.end(), new_hash_.begin());
  for (int64_t z = 0; z < from; ++z) grid_.record_plane_hash(z, new_hash_[static_cast<size_t>(z)]);
  std::fill(written_.begin(), written_.end(), false);
  written_prefix_ = requested_ = from;
  return Status::Ok();
}

Status SweepIo::finish(Status st) {
  if (!st.ok()) drain();
  if (band_height_ > 0) return st;
  const Status committed = committer_->finish();
  if (st.ok()) st = committed;
  close_side_file();
  return st;
}

Result<size_t> SweepIo::await_read(int64_t p, StreamStats& stats) {
  while (true) {
    DG_RETURN_IF_ERROR(pump_reads());
    for (size_t b = 0; b < reads_.size(); ++b) {
      const Buffer& r = reads_[b];
      if (r.plane == p && r.ready && r.band == band_index_) return b;
    }
    DG_RETURN_IF_ERROR(complete_one(stats));
  }
}

Status SweepIo::recycle_reads(const std::vector<size_t>& used) {
  for (size_t b : used) reads_[b] = Buffer{reads_[b].bytes};
  return read_ahead();
}

Status SweepIo::read_ahead() {
  DG_RETURN_IF_ERROR(pump_reads());
  io_.flush();  // all that is queued (a block's writes, the next reads) in one system call
  return Status::Ok();
}

// Starts reads of the next planes in order while read buffers are free (in band mode on into
// the next bands' planes).
Status SweepIo::pump_reads() {
  for (size_t b = 0; b < reads_.size() && next_read_ < reads_total(); ++b) {
    Buffer& buf = reads_[b];
    if (buf.busy || buf.plane >= 0) continue;
    const size_t n = next_read_++;
    if (band_height_ > 0) {
      buf.band = n / order_.size();
      buf.lead = band_lead((*bands_)[buf.band]);
    }
    DG_RETURN_IF_ERROR(submit(buf, io::Op::kRead, order_[n % order_.size()], b));
  }
  return Status::Ok();
}

// Band mode: the buffer takes the band's plane `lead` bytes in, and what follows it is zeros
// (begin_band).
Result<size_t> SweepIo::claim_write_buffer(StreamStats& stats) {
  DG_ASSIGN_OR_RETURN(const size_t b, idle_write_buffer(stats));
  Buffer& buf = writes_[b];
  buf.busy = true;
  if (band_height_ > 0) {
    buf.band = band_index_;
    buf.lead = band_lead(band());
    const size_t last = component_stride() * static_cast<size_t>(m_.components() - 1);
    std::fill(buf.bytes + buf.lead + last + plane_bytes(), buf.bytes + write_buffer_bytes(),
              std::byte{0});
  }
  return b;
}

Result<size_t> SweepIo::idle_write_buffer(StreamStats& stats) {
  const WaitForWrites waiting(stats);
  while (true) {
    for (size_t b = 0; b < writes_.size(); ++b) {
      if (!writes_[b].busy) return b;
    }
    DG_RETURN_IF_ERROR(complete_one(stats));
  }
}

Status SweepIo::write_plane(size_t b, int64_t z, uint64_t hash, StreamStats& stats) {
  if (band_height_ > 0) return submit(writes_[b], io::Op::kWrite, z, b);  // (hashed by the band)
  grid_.record_plane_hash(z, hash);
  new_hash_[static_cast<size_t>(z)] = hash;
  DG_RETURN_IF_ERROR(wait_until_writable(z, stats));
  return submit(writes_[b], io::Op::kWrite, z, b);
}

Status SweepIo::complete_writes(StreamStats& stats) {
  const WaitForWrites waiting(stats);
  while (std::any_of(writes_.begin(), writes_.end(), [](const Buffer& w) { return w.busy; })) {
    DG_RETURN_IF_ERROR(complete_one(stats));
  }
  return Status::Ok();
}

// Old plane p is read from its slot (or, resuming a periodic sweep, the side file) and its
// coefficients from theirs; new plane z goes to the slot `spare` places behind old plane z's,
// without its coefficients (which stay where they are).
Status SweepIo::submit(Buffer& buf, io::Op op, int64_t plane, size_t index) {
  buf.plane = plane;
  buf.busy = true;
  buf.ready = false;
  const bool write = op == io::Op::kWrite;
  buf.parts = 1;
  if (band_height_ > 0) {
    const BandRequests rs = band_requests(buf, write, plane);
    buf.parts = static_cast<int>(rs.size());
    buf.length = 0;
    for (io::Request r : rs) {
      r.op = op;
      r.tag = (write ? kWriteTag : 0) | index;
      buf.length += static_cast<int64_t>(r.length);
      DG_RETURN_IF_ERROR(io_.submit(r));
    }
    return Status::Ok();
  }
  io::Request r;
  r.op = op;
  r.tag = (write ? kWriteTag : 0) | index;
  if (!write && from_side_file(plane)) {
    r.fd = side_fd_;
    r.path = side_path_;
    r.offset = plane * m_.layout.plane_stride;
  } else {
    const PlaneLocation loc = m_.locate_slot(
        m_.slot_of(plane, write ? record_->base_to(m_.slots()) : record_->base_from));
    r.fd = grid_.fd(loc.file);
    r.path = paths_[static_cast<size_t>(loc.file)];
    r.offset = loc.offset;
  }
  r.length = static_cast<size_t>(m_.layout.plane_stride);
  r.buffer = buf.bytes;
  buf.length = static_cast<int64_t>(r.length);
  if (!write && m_.has_coef_files()) {
    DG_RETURN_IF_ERROR(io_.submit(r));
    const uint64_t tag = r.tag;
    r = coef_request(grid_, plane, buf.bytes);
    r.op = op;
    r.tag = tag;
    buf.length += static_cast<int64_t>(r.length);
    buf.parts = 2;
  }
  return io_.submit(r);
}

BandLayout band_layout(const Manifest& m, int64_t height, int64_t r0) {
  const int64_t row = row_bytes(m);
  const int64_t ny = m.shape.ny;
  BandLayout l;
  l.a = (r0 % ny + ny) % ny;
  l.before_end = std::min(height, ny - l.a);
  l.after_start = height - l.before_end;
  l.aligned_after = l.after_start > l.before_end && (ny * row) % kBlock != 0;
  l.lead = l.aligned_after ? (kBlock - l.before_end * row % kBlock) % kBlock : l.a * row % kBlock;
  return l;
}

// A band's transfer of plane `plane`: the blocks holding rows [r0, r0 + height) of the old
// plane, read whole; where they wrap across the grid's ends, rows [a, ny) and then [0, ...) one
// after the other in the buffer: on planes of whole blocks both aligned, else the part the lead
// aligns read O_DIRECT and the rest through the band's buffered descriptors. Or the new plane's
// rows [y0, y1), written where the replacement holds them (on an O_DIRECT descriptor they are
// whole blocks, the last band's up to the slot's padding, which the buffer holds as zeros:
// begin_band).
SweepIo::BandRequests SweepIo::band_requests(const Buffer& buf, bool write, int64_t plane) {
  const int64_t row = row_bytes(m_);
  const int64_t ny = m_.shape.ny;
  const Band& band = (*bands_)[buf.band];
  const auto span = static_cast<int64_t>(component_stride());
  BandRequests out;
  const int64_t state = m_.components() - m_.coef_components();  // components in the ring
  if (!write) {
    const PlaneLocation ring = m_.locate_slot(m_.slot_of(plane, record_->base_from));
    const BandLayout l = band_layout(m_, band_height_, band.r0);
    for (int64_t c = 0; c < m_.components(); ++c) {
      // The component's file, and its first byte there relative to `loc.offset`: a
      // coefficients' record puts each byte where it would lie in a block of the ring
      // (Layout::coef_lead), so the lead that aligns the ring's components aligns them too.
      const bool coef = c >= state;
      const PlaneLocation loc = coef ? m_.locate_coef(plane) : ring;
      const auto f = static_cast<size_t>(loc.file);
      const int64_t base = coef ? m_.layout.coef_lead() + (c - state) * ny * row : c * ny * row;
      const int64_t start = base + l.a * row, end = start + l.before_end * row;
      const int64_t at = static_cast<int64_t>(l.lead) + c * span;  // row r0 in the buffer
      const int64_t wrapped_at = at + l.before_end * row;          // row 0 after the wrap
      // Plane bytes [from, to) into the buffer, plane byte `origin` going to offset
      // `origin_at`; aligned: O_DIRECT, from the block holding `from` to whole blocks (what
      // lies before and after the bytes asked for lands where nothing else does).
      auto read = [&](int64_t from, int64_t to, int64_t origin, int64_t origin_at, bool aligned) {
        if (to <= from) return;
        if (aligned) from = from / kBlock * kBlock;
        io::Request& r = out.emplace_back();
        const bool direct = aligned || !grid_.direct_io();
        r.fd = direct ? (coef ? grid_.coef_fd(loc.file) : grid_.fd(loc.file))
                      : (coef ? band.buffered_coef_read_fds : band.buffered_read_fds)[f];
        r.path = coef ? grid_.coef_path(loc.file) : paths_[f];
        r.offset = loc.offset + from;
        r.length = static_cast<size_t>(aligned ? round_up(to - from) : to - from);
        r.buffered = !aligned;
        r.buffer = buf.bytes + origin_at + (from - origin);
      };
      const int64_t wrap_end = base + l.after_start * row;
      if (l.after_start == 0 || (ny * row) % kBlock == 0) {
        read(start, end, start, at, true);
        read(base, wrap_end, base, wrapped_at, true);
      } else if (!l.aligned_after) {
        const int64_t body = std::max(start, end / kBlock * kBlock);
        read(start, body, start, at, true);
        read(body, end, start, at, false);
        read(base, wrap_end, base, wrapped_at, false);
      } else {
        // The wrapped rows aligned from the first block boundary of the component on (the
        // rows before it, the end of the component before, must not overwrite these).
        const int64_t boundary = std::min(wrap_end, round_up(base));
        read(start, end, start, at, false);
        read(base, boundary, base, wrapped_at, false);
        read(boundary, wrap_end, base, wrapped_at, true);
      }
    }
    return out;
  }
  if (band.shares_edge_blocks) {
    edge_block_requests(buf, plane, out);
    return out;
  }
  const PlaneLocation loc = grid_.locate(plane, FileSet::kReplacement);
  const int64_t bytes = (band.y1 - band.y0) * row;
  for (int64_t c = 0; c < state; ++c) {  // (the coefficients stay in their files)
    io::Request& r = out.emplace_back();
    r.fd = band.write_fds[static_cast<size_t>(loc.file)];
    r.path = band.write_paths[static_cast<size_t>(loc.file)];
    r.offset = loc.offset + c * ny * row + band.y0 * row;
    r.length = static_cast<size_t>(band.whole_blocks ? round_up(bytes) : bytes);
    r.buffered = !band.whole_blocks;
    r.buffer = buf.bytes + buf.lead + c * span + static_cast<size_t>((band.y0 - band.r0) * row);
  }
  return out;
}

// Each component's edge_block_write, O_DIRECT: byte b of the slot lies at the same place in a
// block of the buffer as in the file (the lead and the components' spans keep them aligned).
// The first band keeps the first bytes of each component after the first (edge_heads_); the
// last band puts them after the end of the component before, in the gap the spans leave.
void SweepIo::edge_block_requests(const Buffer& buf, int64_t plane, BandRequests& out) {
  const int64_t row = row_bytes(m_);
  const int64_t component = m_.shape.ny * row;
  const auto span = static_cast<int64_t>(component_stride());
  const Band& band = (*bands_)[buf.band];
  const bool first = buf.band == 0, last = buf.band + 1 == bands_->size();
  const int64_t state = m_.components() - m_.coef_components();
  const auto heads = static_cast<size_t>(state - 1);
  if (heads > 0 && edge_heads_.empty()) {
    edge_heads_.resize(static_cast<size_t>(m_.shape.nz) * heads * kBlock);
  }
  // The buffer's byte for byte `b` of component c's rows in the slot.
  auto at = [&](int64_t c, int64_t b) {
    return buf.bytes + buf.lead + c * span + (b - c * component - band.r0 * row);
  };
  auto head = [&](int64_t c) {  // component c's kept bytes, c >= 1
    return edge_heads_.data() + (static_cast<size_t>(plane) * heads + static_cast<size_t>(c - 1)) *
                                    static_cast<size_t>(kBlock);
  };
  for (int64_t c = 1; c < state && first; ++c) {
    const int64_t from = c * component;
    std::memcpy(head(c), at(c, from), static_cast<size_t>(round_up(from) - from));
  }
  const PlaneLocation loc = grid_.locate(plane, FileSet::kReplacement);
  for (int64_t c = 0; c < state; ++c) {
    const ByteRange w = edge_block_write(m_, band.y0, band.y1, c, first, last);
    const int64_t next = (c + 1) * component;  // (the next component's first byte)
    if (last && c + 1 < state)
      std::memcpy(at(c, next), head(c + 1), static_cast<size_t>(w.end - next));
    if (w.end == w.begin) continue;  // (the first band's of a later component, of under 2 blocks)
    io::Request& r = out.emplace_back();
    r.fd = band.write_fds[static_cast<size_t>(loc.file)];
    r.path = band.write_paths[static_cast<size_t>(loc.file)];
    r.offset = loc.offset + w.begin;
    r.length = static_cast<size_t>(w.end - w.begin);
    r.buffer = at(c, w.begin);
  }
}

// Where a band's plane starts in a buffer (band_layout).
size_t SweepIo::band_lead(const Band& band) const {
  return band_layout(m_, band_height_, band.r0).lead;
}

// The sweep's first band: every buffer idle, and the reads of every band in `order` each.
// A later band goes on with the reads and writes the bands before it started.
void SweepIo::begin_band(std::vector<int64_t> order) {
  if (band_index_ > 0) return;
  for (Buffer& b : reads_) b = Buffer{b.bytes};
  for (Buffer& b : writes_) b = Buffer{b.bytes};
  order_ = std::move(order);
  next_read_ = 0;
}

Status SweepIo::complete_one(StreamStats& stats) {
  const auto t0 = Clock::now();
  auto c = io_.wait();
  stats.io_wait_seconds += seconds_since(t0);
  if (!c.ok()) return c.status();
  const bool write = (c->tag & kWriteTag) != 0;
  Buffer& buf = (write ? writes_ : reads_)[static_cast<size_t>(c->tag & ~kWriteTag)];
  if (!c->status.ok()) {
    buf.busy = false;
    return c->status;
  }
  if (--buf.parts > 0) return Status::Ok();
  buf.busy = false;
  if (write) {
    stats.bytes_written += static_cast<uint64_t>(buf.length);
    if (band_height_ == 0) note_written(buf.plane);
    buf.plane = -1;
  } else {
    stats.bytes_read += static_cast<uint64_t>(buf.length);
    if (band_height_ == 0 && m_.has_coef_files() && !coefficients_in_record()) {
      coefficients_to_plane(m_.layout, buf.bytes);  // (the whole plane's, packed)
    }
    buf.ready = true;  // verified as it is converted
  }
  return Status::Ok();
}

void SweepIo::drain() {
  while (io_.in_flight() > 0) (void)io_.wait();
}

// Writes of new planes complete in any order: the prefix [0, written_prefix_) is done, and
// the committer is asked to make it durable every half window.
void SweepIo::note_written(int64_t z) {
  const int64_t nz = m_.shape.nz;
  written_[static_cast<size_t>(z)] = true;
  while (written_prefix_ < nz && written_[static_cast<size_t>(written_prefix_)]) {
    ++written_prefix_;
  }
  if (written_prefix_ >= requested_ + std::max<int64_t>(1, window() / 2) || written_prefix_ == nz) {
    requested_ = written_prefix_;
    committer_->request(requested_);
  }
}

// How far writes may run ahead of the durable prefix: spare slots not needed by the levels.
int64_t SweepIo::window() const { return record_->spare - int64_t{record_->levels} * rz_; }

// Writing new plane z destroys old plane z - spare, which a resume from the durable prefix
// d needs while z - spare >= d - levels rz: wait until the prefix is far enough.
Status SweepIo::wait_until_writable(int64_t z, StreamStats& stats) {
  const int64_t need = z - window() + 1;
  if (need <= 0 || committer_->durable() >= need) return Status::Ok();
  const WaitForWrites waiting(stats);
  while (written_prefix_ < need) DG_RETURN_IF_ERROR(complete_one(stats));
  requested_ = std::max(requested_, written_prefix_);
  committer_->request(requested_);
  const auto t0 = Clock::now();
  Status st = committer_->wait_durable(need);
  stats.io_wait_seconds += seconds_since(t0);
  return st;
}

// Periodic sweeps end with the old planes [0, levels rz), which they overwrite early: a new
// sweep first copies them into the side file (durable before anything is overwritten), and
// every sweep reads them from there.
Status SweepIo::open_side_file(const SweepRecord& record) {
  if (record.side_file.empty()) return Status::Ok();
  side_path_ = join_path(grid_.dir(), record.side_file);
  side_planes_ = std::min(m_.shape.nz, int64_t{record.levels} * rz_);
  const bool resumed = record.done > 0;
  bool direct = false;
  DG_ASSIGN_OR_RETURN(
      side_fd_, open_data_file(side_path_, resumed ? O_RDWR : O_RDWR | O_CREAT | O_TRUNC, &direct));
  if (resumed) return Status::Ok();
  // The planes' parts in the ring (their coefficients are never overwritten).
  const int64_t stride = m_.layout.plane_stride;
  void* buf = writes_.front().bytes;  // idle between sweeps
  for (int64_t p = 0; p < side_planes_; ++p) {
    const PlaneLocation loc = m_.locate_slot(m_.slot_of(p, record.base_from));
    DG_RETURN_IF_ERROR(pread_full(grid_.fd(loc.file), buf, static_cast<size_t>(stride), loc.offset,
                                  paths_[static_cast<size_t>(loc.file)]));
    DG_RETURN_IF_ERROR(
        pwrite_full(side_fd_, buf, static_cast<size_t>(stride), p * stride, side_path_));
  }
  if (::fdatasync(side_fd_) != 0) return errno_status(errno, "fsync", side_path_);
  return fsync_path(grid_.dir());
}

void SweepIo::close_side_file() {
  if (side_fd_ >= 0) ::close(side_fd_);
  side_fd_ = -1;
}

}  // namespace deepgrid::internal::stream
