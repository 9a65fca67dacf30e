// The order of a rank's collectives and their progress thread (see
// collective_queue.h).
#include "collective_queue.h"

#include <chrono>

namespace mrt {

CollectiveQueue::CollectiveQueue(bool threaded) : threaded(threaded) {
  if (threaded)
    thread = std::thread([this] { runQueued(); });
}

CollectiveQueue::~CollectiveQueue() {
  if (!threaded)
    return;
  {
    std::lock_guard<std::mutex> lock(mutex);
    stopping = true;
  }
  changed.notify_all();
  thread.join();
}

template <typename Body> void CollectiveQueue::timed(Body body) {
  auto begin = std::chrono::steady_clock::now();
  waiting.store(true, std::memory_order_relaxed);
  body();
  waiting.store(false, std::memory_order_relaxed);
  exposed += std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                           begin)
                 .count();
}

int64_t CollectiveQueue::start(std::function<void()> work) {
  if (!threaded) {
    timed(work);
    return issued++;
  }
  int64_t ticket;
  {
    std::lock_guard<std::mutex> lock(mutex);
    queued.push_back(std::move(work));
    ticket = issued++;
  }
  changed.notify_all();
  return ticket;
}

bool CollectiveQueue::wait(int64_t ticket) {
  if (ticket < 0 || ticket >= issued)
    return false;
  if (!threaded)
    return true;
  timed([&] {
    std::unique_lock<std::mutex> lock(mutex);
    changed.wait(lock, [&] { return completed > ticket; });
  });
  return true;
}

void CollectiveQueue::runBlocking(const std::function<void()> &work) {
  timed([&] {
    if (threaded) {
      // The progress thread is idle once everything issued is complete and
      // nothing new can be issued but by this thread: MPI sees one caller at
      // a time, as MPI_THREAD_SERIALIZED requires.
      std::unique_lock<std::mutex> lock(mutex);
      changed.wait(lock, [&] { return completed == issued; });
    }
    work();
  });
}

void CollectiveQueue::runQueued() {
  std::unique_lock<std::mutex> lock(mutex);
  for (;;) {
    changed.wait(lock, [&] { return stopping || !queued.empty(); });
    if (queued.empty())
      return;
    std::function<void()> work = std::move(queued.front());
    queued.pop_front();
    lock.unlock();
    work();
    lock.lock();
    ++completed;
    changed.notify_all();
  }
}

} // namespace mrt
