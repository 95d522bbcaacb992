#pragma once
// The job's file work on a thread of its own, so that reading the next block and
// writing a checkpoint overlap the fold. Tasks run one at a time in submission order
// (HDF5 is not thread-safe: only one thread may be inside it); the caller waits on
// each task's future before it uses what the task touched. Without a thread (an MPI
// team, whose collective reads must stay on the main thread in program order) a task
// runs at submission.
#include <kembed/job/detail/support.hpp>

#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <thread>

namespace kembed::job::detail {

class IoWorker {
 public:
  explicit IoWorker(bool threaded) {
    if (threaded) thread_ = std::thread([this] { loop(); });
  }
  ~IoWorker() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_one();
    if (thread_.joinable()) thread_.join();  // runs what was queued, then stops
  }
  IoWorker(IoWorker const&) = delete;
  IoWorker& operator=(IoWorker const&) = delete;

  // The task's result, or its exception, through the future.
  std::future<void> submit(std::function<void()> work) {
    std::packaged_task<void()> task(std::move(work));
    auto done = task.get_future();
    if (!thread_.joinable()) {
      task();
      return done;
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      queue_.push_back(std::move(task));
    }
    wake_.notify_one();
    return done;
  }

 private:
  void loop() {
    unpin_helper_thread();
    for (;;) {
      std::packaged_task<void()> task;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [this] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;
        task = std::move(queue_.front());
        queue_.pop_front();
      }
      task();
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::packaged_task<void()>> queue_;
  bool stop_ = false;
  std::thread thread_;
};

// A helper thread that is joined when it goes out of scope, also when an error unwinds.
class JoiningThread {
 public:
  JoiningThread() = default;
  // The thread may run on every core of the process (unpin_helper_thread).
  template <class F>
  explicit JoiningThread(F&& f)
      : thread_([g = std::forward<F>(f)]() mutable {
          unpin_helper_thread();
          g();
        }) {}
  ~JoiningThread() { join(); }
  JoiningThread(JoiningThread&&) = default;
  JoiningThread& operator=(JoiningThread&& other) {
    join();
    thread_ = std::move(other.thread_);
    return *this;
  }
  void join() {
    if (thread_.joinable()) thread_.join();
  }

 private:
  std::thread thread_;
};

}  // namespace kembed::job::detail
