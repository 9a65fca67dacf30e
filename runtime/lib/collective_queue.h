// Internal: the order in which a rank's collectives run, and the thread that
// runs the nonblocking ones while the rank computes.
//
// MPI requires every rank to issue the collectives of a communicator in one
// order; a compiled step issues them in program order, started or blocking,
// so the queue keeps that order: work runs first in, first out, and a
// blocking collective waits for every earlier one. Started work runs on a
// progress thread, which drives the MPI request to completion itself
// (Open MPI's nonblocking collectives advance only inside MPI calls, so
// without it a started sum would do nothing until its wait). The work's
// poll loop sleeps between tests while the caller computes, so that it
// does not take a core from the compute it overlaps, and stops sleeping
// once the caller waits (callerWaiting). Without MPI_THREAD_SERIALIZED (an
// embedding host that initialised MPI for one thread) work runs at once on
// the caller's thread: correct, with nothing overlapped.
#ifndef MEGATRON_RT_LIB_COLLECTIVE_QUEUE_H
#define MEGATRON_RT_LIB_COLLECTIVE_QUEUE_H

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace mrt {

class CollectiveQueue {
public:
  explicit CollectiveQueue(bool threaded);
  ~CollectiveQueue();
  CollectiveQueue(const CollectiveQueue &) = delete;
  CollectiveQueue &operator=(const CollectiveQueue &) = delete;

  /// Queues `work` behind every earlier collective; returns its ticket.
  int64_t start(std::function<void()> work);
  /// Returns once the work of `ticket`, and so every earlier one, is done;
  /// false at once for a ticket start() never returned.
  bool wait(int64_t ticket);
  /// Runs `work` on the calling thread once every earlier collective is
  /// done: a blocking collective, which needs no hand-off.
  void runBlocking(const std::function<void()> &work);

  /// Whether the caller is blocked in wait() or runBlocking(): the progress
  /// thread then polls without sleeping, since no compute needs the core.
  bool callerWaiting() const {
    return waiting.load(std::memory_order_relaxed);
  }

  /// Seconds the calling thread spent in wait() and runBlocking(): the
  /// communication the step did not hide behind compute.
  double exposedSeconds() const { return exposed; }

private:
  void runQueued();
  template <typename Body> void timed(Body body);

  const bool threaded;
  std::mutex mutex;
  std::condition_variable changed;
  std::deque<std::function<void()>> queued;
  int64_t issued = 0, completed = 0;
  bool stopping = false;
  double exposed = 0; // the caller's thread only
  std::atomic<bool> waiting{false};
  std::thread thread; // last: starts once everything above is initialised
};

} // namespace mrt

#endif // MEGATRON_RT_LIB_COLLECTIVE_QUEUE_H
