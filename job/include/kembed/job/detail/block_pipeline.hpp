#pragma once
// The batch, read one block ahead: while the job folds one block, the I/O worker
// reads the next into the other buffer. The worker runs its tasks in submission
// order, so other file work given to it (a checkpoint, the table's check) keeps its
// place between the reads.
#include <kembed/job/detail/io_worker.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <utility>
#include <vector>

namespace kembed::job::detail {

class BlockPipeline {
 public:
  struct Block {
    std::vector<std::int64_t> ids;
    std::vector<float> dy;
    std::int64_t position = 0, n = 0, a = 0, b = 0;  // global [position, +n); this rank's [a, b)
    // A bag batch's block: `position` and `n` count bags; offsets[0 .. n] are their
    // global first positions, ids and weights the positions between, dy one row a bag.
    std::vector<std::int64_t> offsets;
    std::vector<float> weights;
    double read_seconds = 0;
  };
  // `read` fills a block's ids and dy with this rank's positions [a, b), at most
  // `part_max` of them (d columns of dy each); `threaded`: on a thread of its own.
  BlockPipeline(bool threaded, std::int64_t part_max, std::int64_t d, std::function<void(Block&)> read)
      : read_(std::move(read)), io_(threaded) {
    for (auto& block : blocks_) {
      block.ids.resize(static_cast<std::size_t>(part_max));
      block.dy.resize(static_cast<std::size_t>(part_max * d));
    }
  }

  // Queues the read of global positions [first, first + n), this rank's [a, b), into
  // the buffer not being folded.
  void read_ahead(std::int64_t first, std::int64_t n, std::int64_t a, std::int64_t b) {
    Block& block = blocks_[filling_];
    filling_ = 1 - filling_;
    block.position = first, block.n = n, block.a = a, block.b = b;
    pending_ = io_.submit([this, &block] {
      auto const r0 = std::chrono::steady_clock::now();
      read_(block);
      block.read_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - r0).count();
    });
  }
  // Waits for the block queued last and hands it over (throws what its read threw).
  // It stays unchanged until the read after the next one is queued.
  Block& take() {
    pending_.get();
    return blocks_[1 - filling_];
  }
  // Other file work, in order with the reads.
  std::future<void> submit(std::function<void()> work) { return io_.submit(std::move(work)); }

 private:
  std::function<void(Block&)> read_;
  Block blocks_[2];
  int filling_ = 0;
  std::future<void> pending_;
  IoWorker io_;  // last: joined before the buffers its tasks use go
};

}  // namespace kembed::job::detail
