// The emulator's scheduler. A grid's blocks run one after another on the
// calling thread; the CUDA threads of a block are fibers (ucontext), each
// run until it reaches a barrier or ends, in a random order (fixed seed)
// between barriers, so a missing barrier shows as a wrong or NaN result
// rather than depending on how the host happens to schedule threads.
#include "../lib/cuda_check.h"
#include "mma.h"

#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <memory>
#include <random>
#include <unordered_set>
#include <utility>
#include <vector>

namespace emu {
namespace {

constexpr unsigned kWarpSize = 32;
constexpr unsigned kFullMask = 0xffffffffu;
constexpr unsigned kMaxBlockThreads = 1024;
// Shared memory per block on sm_90: 227 KiB with the opt-in, 48 KiB
// without it (and at most that in static declarations).
constexpr size_t kMaxSharedBytes = 227 * 1024;
constexpr size_t kDefaultSharedBytes = 48 * 1024;
// Kernels keep register tiles of a few KiB on the stack.
constexpr size_t kStackBytes = 256 * 1024;
// Uninitialised shared and device memory reads as NaN.
constexpr int kGarbageByte = 0xff;

enum class Wait { None, BlockBarrier, WarpBarrier, Exited };

struct AsyncCopy {
  unsigned char *dst;
  const unsigned char *src;
  int copyBytes, sourceBytes;
  bool landed; // performed at its issue
};

struct Thread {
  ucontext_t context;
  uint3 index;
  Wait wait;
  unsigned shuffles;    // shuffles taken part in: picks the slot buffer
  unsigned collectives; // wmma calls taken part in: picks the slot buffer
  std::vector<AsyncCopy> uncommitted;
  std::deque<std::vector<AsyncCopy>> groups; // committed, oldest first
};

// A fiber's stack, with a PROT_NONE page below it: an overflow faults.
class Stack {
public:
  Stack() {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    mapped_ = kStackBytes + page;
    mapping_ = mmap(nullptr, mapped_, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (mapping_ == MAP_FAILED || mprotect(mapping_, page, PROT_NONE) != 0) {
      std::perror("cuda-emulator: fiber stack");
      std::abort();
    }
    lowest_ = static_cast<char *>(mapping_) + page;
  }
  ~Stack() { munmap(mapping_, mapped_); }
  Stack(const Stack &) = delete;
  Stack &operator=(const Stack &) = delete;
  void *lowest() const { return lowest_; } // ucontext's ss_sp

private:
  void *mapping_;
  size_t mapped_;
  void *lowest_;
};

using WarpSlots = std::array<std::array<uint64_t, kWarpSize>, 2>;

// A lane's part of a wmma call: which call, and the data it published.
struct CollectiveSlot {
  const char *operation;
  unsigned char data[kCollectiveBytes];
};
using WarpCollectiveSlots = std::array<std::array<CollectiveSlot, kWarpSize>, 2>;

// The block that runs now. Fibers and their stacks are kept from block to
// block.
struct Block {
  std::vector<Thread> threads;
  std::vector<std::unique_ptr<Stack>> stacks;
  // Shuffle values, double buffered (Thread::shuffles): a lane can only
  // write a buffer again after a barrier every lane reaches after reading.
  std::vector<WarpSlots> slots;
  std::vector<WarpCollectiveSlots> collectiveSlots; // the same for wmma
  // Dynamic shared memory at offset 0, static declarations after it.
  size_t dynamicBytes = 0, sharedEnd = 0;
  std::vector<std::pair<const void *, size_t>> statics; // key, offset
  Thread *current = nullptr;
  ucontext_t scheduler;
  const std::function<void()> *body = nullptr;
};

Block block;
size_t optedInSharedBytes = kDefaultSharedBytes;
std::unordered_set<void *> deviceAllocations;

unsigned char *sharedWindow() {
  static unsigned char *window =
      static_cast<unsigned char *>(std::aligned_alloc(128, kMaxSharedBytes));
  return window;
}

std::mt19937 &scheduleRandom() {
  static std::mt19937 random([] {
    const char *seed = std::getenv("MEGATRON_CUDA_EMULATOR_SEED");
    return seed ? static_cast<unsigned>(std::strtoul(seed, nullptr, 10)) : 1u;
  }());
  return random;
}

[[noreturn]] __attribute__((format(printf, 1, 2))) void fail(const char *fmt,
                                                             ...) {
  char message[1024];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(message, sizeof(message), fmt, args);
  va_end(args);
  char where[64] = "";
  if (block.current)
    std::snprintf(where, sizeof(where),
                  "block (%u,%u,%u) thread %u: ", currentBlockIdx.x,
                  currentBlockIdx.y, currentBlockIdx.z, block.current->index.x);
  else if (block.body)
    std::snprintf(where, sizeof(where), "block (%u,%u,%u): ", currentBlockIdx.x,
                  currentBlockIdx.y, currentBlockIdx.z);
  std::fprintf(stderr, "cuda-emulator: %s%s\n", where, message);
  std::abort();
}

Thread &current() {
  if (!block.current)
    fail("a device function ran outside a kernel");
  return *block.current;
}

// src-size bytes copied, the rest of the copy zero-filled.
void land(AsyncCopy &copy) {
  std::memcpy(copy.dst, copy.src, copy.sourceBytes);
  std::memset(copy.dst + copy.sourceBytes, 0,
              copy.copyBytes - copy.sourceBytes);
  copy.landed = true;
}

void suspend(Wait wait) {
  Thread &thread = current();
  thread.wait = wait;
  swapcontext(&thread.context, &block.scheduler);
}

void resume(Thread &thread) {
  block.current = &thread;
  currentThreadIdx = thread.index;
  swapcontext(&block.scheduler, &thread.context);
  block.current = nullptr;
}

void threadMain() {
  (*block.body)();
  Thread &thread = current();
  if (!thread.uncommitted.empty() || !thread.groups.empty())
    fail("ended with cp.async copies it never waited for");
  thread.wait = Wait::Exited; // uc_link returns to the scheduler
}

void startThread(unsigned i) {
  Thread &thread = block.threads[i];
  thread.index = {i, 0, 0};
  thread.wait = Wait::None;
  thread.shuffles = 0;
  thread.collectives = 0;
  getcontext(&thread.context);
  thread.context.uc_stack.ss_sp = block.stacks[i]->lowest();
  thread.context.uc_stack.ss_size = kStackBytes;
  thread.context.uc_link = &block.scheduler;
  makecontext(&thread.context, threadMain, 0);
}

// Releases the threads of a barrier every live thread it names has reached,
// warps before the block. False when every thread has ended; a barrier no
// one can release is a deadlock on the GPU too.
bool releaseBarrier() {
  const unsigned count = static_cast<unsigned>(block.threads.size());
  bool released = false;
  for (unsigned first = 0; first < count; first += kWarpSize) {
    unsigned waiting = 0, exited = 0;
    for (unsigned i = first; i < first + kWarpSize; ++i) {
      waiting += block.threads[i].wait == Wait::WarpBarrier;
      exited += block.threads[i].wait == Wait::Exited;
    }
    if (waiting == 0 || waiting + exited < kWarpSize)
      continue;
    for (unsigned i = first; i < first + kWarpSize; ++i)
      if (block.threads[i].wait == Wait::WarpBarrier)
        block.threads[i].wait = Wait::None;
    released = true;
  }
  if (released)
    return true;
  unsigned atBlock = 0, atWarp = 0, exited = 0;
  for (const Thread &thread : block.threads) {
    atBlock += thread.wait == Wait::BlockBarrier;
    atWarp += thread.wait == Wait::WarpBarrier;
    exited += thread.wait == Wait::Exited;
  }
  if (exited == count)
    return false;
  if (atWarp > 0)
    fail("deadlock: %u threads wait at a warp barrier or shuffle whose warp "
         "has lanes at __syncthreads (%u threads there, %u ended)",
         atWarp, atBlock, exited);
  for (Thread &thread : block.threads)
    if (thread.wait == Wait::BlockBarrier)
      thread.wait = Wait::None;
  return true;
}

void runBlock(uint3 index) {
  currentBlockIdx = index;
  std::memset(sharedWindow(), kGarbageByte, block.dynamicBytes);
  block.sharedEnd = block.dynamicBytes;
  block.statics.clear();
  for (unsigned i = 0; i < block.threads.size(); ++i)
    startThread(i);
  std::vector<unsigned> order;
  do {
    order.clear();
    for (unsigned i = 0; i < block.threads.size(); ++i)
      if (block.threads[i].wait == Wait::None)
        order.push_back(i);
    std::shuffle(order.begin(), order.end(), scheduleRandom());
    for (unsigned i : order)
      resume(block.threads[i]);
  } while (releaseBarrier());
}

void checkLaunch(const LaunchConfig &c) {
  const char *problem = nullptr;
  if (c.grid.x == 0 || c.grid.y == 0 || c.grid.z == 0 || c.grid.x > INT32_MAX ||
      c.grid.y > 65535 || c.grid.z > 65535)
    problem = "grid outside [1, 2^31-1] x [1, 65535] x [1, 65535]";
  else if (c.block.x == 0 || c.block.x > kMaxBlockThreads)
    problem = "block outside [1, 1024] threads";
  else if (c.block.y != 1 || c.block.z != 1)
    problem = "2-D and 3-D blocks are not emulated";
  else if (c.block.x % kWarpSize != 0)
    problem = "blocks of partial warps are not emulated";
  else if (c.sharedBytes > kMaxSharedBytes)
    problem = "more dynamic shared memory than a block has (227 KiB)";
  else if (c.sharedBytes > optedInSharedBytes)
    problem = "over 48 KiB of dynamic shared memory without "
              "cudaFuncSetAttribute(MaxDynamicSharedMemorySize)";
  if (problem)
    fail("invalid launch <<<(%u,%u,%u), (%u,%u,%u), %zu>>>: %s", c.grid.x,
         c.grid.y, c.grid.z, c.block.x, c.block.y, c.block.z, c.sharedBytes,
         problem);
}

} // namespace

void runGrid(const LaunchConfig &config, const std::function<void()> &body) {
  if (block.body)
    fail("a kernel launched a kernel: dynamic parallelism is not emulated");
  checkLaunch(config);
  const unsigned threads = config.block.x;
  while (block.stacks.size() < threads)
    block.stacks.push_back(std::make_unique<Stack>());
  block.threads.resize(threads);
  block.slots.resize(threads / kWarpSize);
  block.collectiveSlots.resize(threads / kWarpSize);
  block.dynamicBytes = config.sharedBytes;
  block.body = &body;
  currentGridDim = config.grid;
  currentBlockDim = config.block;
  for (unsigned z = 0; z < config.grid.z; ++z)
    for (unsigned y = 0; y < config.grid.y; ++y)
      for (unsigned x = 0; x < config.grid.x; ++x)
        runBlock({x, y, z});
  block.body = nullptr;
}

void syncThreads() { suspend(Wait::BlockBarrier); }

void syncWarp(unsigned mask) {
  if (mask != kFullMask)
    fail("__syncwarp over part of a warp (mask %#x) is not emulated", mask);
  suspend(Wait::WarpBarrier);
}

void shuffleXor(unsigned mask, const void *value, void *result, size_t bytes,
                int laneMask) {
  if (mask != kFullMask)
    fail("shuffles over part of a warp (mask %#x) are not emulated", mask);
  if (laneMask < 0 || laneMask >= static_cast<int>(kWarpSize))
    fail("__shfl_xor_sync lane mask %d outside the warp", laneMask);
  Thread &thread = current();
  const unsigned lane = thread.index.x % kWarpSize;
  const unsigned first = thread.index.x - lane;
  const unsigned taken = thread.shuffles++;
  auto &slots = block.slots[first / kWarpSize][taken % 2];
  std::memcpy(&slots[lane], value, bytes);
  suspend(Wait::WarpBarrier);
  // The source lane has taken this shuffle (and may be at the next one);
  // anything else, an ended lane included, is undefined on the GPU.
  const unsigned source = lane ^ static_cast<unsigned>(laneMask);
  const unsigned sourceTaken = block.threads[first + source].shuffles - 1;
  if (sourceTaken != taken && sourceTaken != taken + 1)
    fail("lane %u shuffled with lane %u, which did not take part", lane,
         source);
  std::memcpy(result, &slots[source], bytes);
}

unsigned currentLane() { return current().index.x % kWarpSize; }

void failCollective(const char *operation, const char *problem) {
  fail("%s: %s", operation, problem);
}

// Double buffered as shuffles are: a lane reaches the next collective's
// buffer only once every lane has reached this one, and can only write this
// buffer again after every lane has reached the one in between.
void warpCollective(const char *operation, const void *data, size_t bytes,
                    void *lanes) {
  if (bytes > kCollectiveBytes)
    fail("%s: %zu bytes exchanged, over %zu", operation, bytes,
         kCollectiveBytes);
  Thread &thread = current();
  const unsigned lane = thread.index.x % kWarpSize;
  const unsigned first = thread.index.x - lane;
  const unsigned taken = thread.collectives++;
  auto &slots = block.collectiveSlots[first / kWarpSize][taken % 2];
  slots[lane].operation = operation;
  std::memcpy(slots[lane].data, data, bytes);
  suspend(Wait::WarpBarrier);
  // Every lane must be at this call or already at the next one; a lane that
  // ended, or was released from a __syncwarp or a shuffle, is not.
  for (unsigned other = 0; other < kWarpSize; ++other) {
    const unsigned otherTaken = block.threads[first + other].collectives - 1;
    if ((otherTaken != taken && otherTaken != taken + 1) ||
        std::strcmp(slots[other].operation, operation) != 0)
      fail("%s: lane %u of the warp did not make the same call (the 32 lanes "
           "of a warp must all make each wmma call)",
           operation, other);
    std::memcpy(static_cast<unsigned char *>(lanes) + other * bytes,
                slots[other].data, bytes);
  }
}

void *dynamicSharedBase() {
  current();
  return sharedWindow();
}

void *staticSharedBlock(const void *key, size_t bytes, size_t align) {
  current();
  for (const auto &[declaration, offset] : block.statics)
    if (declaration == key)
      return sharedWindow() + offset;
  const size_t offset = (block.sharedEnd + align - 1) / align * align;
  if (offset + bytes - block.dynamicBytes > kDefaultSharedBytes ||
      offset + bytes > kMaxSharedBytes)
    fail("static __shared__ declarations past the block's shared memory");
  std::memset(sharedWindow() + offset, kGarbageByte, bytes);
  block.statics.emplace_back(key, offset);
  block.sharedEnd = offset + bytes;
  return sharedWindow() + offset;
}

unsigned sharedAddress(const void *generic) {
  const auto *p = static_cast<const unsigned char *>(generic);
  if (p < sharedWindow() || p >= sharedWindow() + block.sharedEnd)
    fail("__cvta_generic_to_shared of %p, which is not shared memory", generic);
  return static_cast<unsigned>(p - sharedWindow());
}

void cpAsync(unsigned sharedDst, const void *globalSrc, int copyBytes,
             int sourceBytes) {
  Thread &thread = current();
  if (sourceBytes < 0 || sourceBytes > copyBytes)
    fail("cp.async src-size %d outside [0, %d]", sourceBytes, copyBytes);
  if (sharedDst % copyBytes != 0 ||
      reinterpret_cast<uintptr_t>(globalSrc) % copyBytes != 0)
    fail("cp.async of %d bytes from %p to shared %#x: misaligned", copyBytes,
         globalSrc, sharedDst);
  if (sharedDst + copyBytes > block.sharedEnd)
    fail("cp.async to shared %#x past the block's %zu bytes", sharedDst,
         block.sharedEnd);
  AsyncCopy copy{sharedWindow() + sharedDst,
                 static_cast<const unsigned char *>(globalSrc), copyBytes,
                 sourceBytes, false};
  // A copy may land anywhere between its issue and the wait: at once
  // (which shows overwrites of data other threads still read) or at the
  // wait (which shows reads before the wait), chosen at random.
  if (scheduleRandom()() % 2)
    land(copy);
  thread.uncommitted.push_back(copy);
}

void cpAsyncCommitGroup() {
  Thread &thread = current();
  thread.groups.push_back(std::move(thread.uncommitted));
  thread.uncommitted.clear();
}

void cpAsyncWaitGroup(int pending) {
  Thread &thread = current();
  while (thread.groups.size() > static_cast<size_t>(pending)) {
    for (AsyncCopy &copy : thread.groups.front())
      if (!copy.landed)
        land(copy);
    thread.groups.pop_front();
  }
}

void *deviceAllocate(size_t bytes) {
  const size_t rounded = std::max<size_t>((bytes + 255) / 256 * 256, 256);
  void *p = std::aligned_alloc(256, rounded);
  std::memset(p, kGarbageByte, rounded);
  deviceAllocations.insert(p);
  return p;
}

void deviceFree(void *p) {
  if (p && deviceAllocations.erase(p) == 0)
    fail("cudaFree of %p, which cudaMalloc did not return", p);
  std::free(p);
}

void checkSharedOptIn(int bytes) {
  if (bytes < 0 || static_cast<size_t>(bytes) > kMaxSharedBytes)
    fail("cudaFuncSetAttribute(MaxDynamicSharedMemorySize, %d): over the "
         "227 KiB a block has",
         bytes);
  optedInSharedBytes = std::max(optedInSharedBytes, static_cast<size_t>(bytes));
}

} // namespace emu

// The rank's stream of the real runtime (context.cpp): the emulator runs
// every call to completion, so one stream is as good as any.
cudaStream_t mrt::cuda::computeStream() { return nullptr; }
