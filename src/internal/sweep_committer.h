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

class SweepCommitter {
 public:
  // `hashes` holds the new planes' checksums; entries below a requested prefix are final.
  SweepCommitter(const Grid& grid, SweepRecord record, const std::vector<uint64_t>& hashes)
      : grid_(grid), record_(std::move(record)), hashes_(hashes), durable_(record_.done) {
    thread_ = std::thread([this] { loop(); });
  }
  SweepCommitter(const SweepCommitter&) = delete;
  SweepCommitter& operator=(const SweepCommitter&) = delete;
  ~SweepCommitter() { (void)stop(); }

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

  // Finishes what was requested and ends the thread; returns its error, if any.
  Status stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
    return error_;
  }

 private:
  void loop() {
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      cv_.wait(lock, [&] { return wanted_ > durable_ || stopping_; });
      if (wanted_ <= durable_ || !error_.ok()) return;  // stopping, nothing left to do
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
      if (!error_.ok()) return;
    }
  }

  const Grid& grid_;
  SweepRecord record_;  // the committer thread's copy
  const std::vector<uint64_t>& hashes_;
  std::mutex mu_;
  std::condition_variable cv_;
  int64_t wanted_ = 0;
  int64_t durable_;
  bool stopping_ = false;
  Status error_;
  std::thread thread_;
};

}  // namespace deepgrid::internal
