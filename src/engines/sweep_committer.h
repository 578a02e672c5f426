// internal: makes an in-place sweep's progress durable in the background (resume.h).
//
// The engine's I/O thread reports how many new planes have been written (a prefix [0, done)
// whose hashes are final); the committer thread fsyncs the data files and rewrites the sweep
// record with that prefix, off the compute path. Before writing plane z the engine waits until
// z < durable() + spare - levels * rz, so it never destroys an old plane a resume would need.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "deepgrid/resume.h"
#include "deepgrid/store.h"

namespace deepgrid::internal {

// One thread for a whole run, serving its sweeps one after the other.
class SweepCommitter {
 public:
  // `hashes` holds the new planes' checksums; entries below a requested prefix are final.
  SweepCommitter(const Grid& grid, const std::vector<uint64_t>& hashes)
      : grid_(grid), hashes_(hashes) {
    thread_ = std::thread([this] { loop(); });
  }
  SweepCommitter(const SweepCommitter&) = delete;
  SweepCommitter& operator=(const SweepCommitter&) = delete;
  ~SweepCommitter() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

  // Starts serving a sweep whose record (already durable) says `record.done` planes are done.
  void begin(SweepRecord record) {
    std::lock_guard<std::mutex> lock(mu_);
    record_ = std::move(record);
    wanted_ = durable_ = record_.done;
    error_ = Status::Ok();
  }

  // Asks for new planes [0, done) to be made durable (no-op when they are already asked for).
  void request(int64_t done) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (done <= wanted_) return;
      wanted_ = done;
    }
    cv_.notify_all();
  }

  // Blocks until [0, done) is durable (it must have been requested). Fails with the
  // committer's error, which stays.
  Status wait_durable(int64_t done) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return durable_ >= done || !error_.ok(); });
    return error_;
  }

  int64_t durable() {
    std::lock_guard<std::mutex> lock(mu_);
    return durable_;
  }

  // Waits until what was requested is durable (or failed); returns the sweep's error, if any.
  Status finish() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return durable_ >= wanted_ || !error_.ok(); });
    return error_;
  }

 private:
  void loop() {
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      cv_.wait(lock, [&] { return (wanted_ > durable_ && error_.ok()) || stopping_; });
      if (stopping_) return;
      record_.done = wanted_;
      record_.hashes.assign(hashes_.begin(), hashes_.begin() + record_.done);
      lock.unlock();
      Status st = grid_.save_sweep(record_);
      lock.lock();
      if (st.ok()) {
        durable_ = record_.done;
      } else {
        error_ = st;
      }
      cv_.notify_all();
    }
  }

  const Grid& grid_;
  SweepRecord record_;  // the sweep being served
  const std::vector<uint64_t>& hashes_;
  std::mutex mu_;
  std::condition_variable cv_;
  int64_t wanted_ = 0;
  int64_t durable_ = 0;
  bool stopping_ = false;
  Status error_;
  std::thread thread_;
};

}  // namespace deepgrid::internal
