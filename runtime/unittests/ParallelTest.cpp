// mrt_parallel_for: every iteration runs once, in one contiguous part per
// thread.
#include "megatron_rt/parallel.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <mutex>
#include <utility>
#include <vector>

namespace {

struct Parts {
  std::mutex lock;
  std::vector<std::pair<int64_t, int64_t>> ranges;
  std::vector<int> visits;
};

void record(void *captures, int64_t begin, int64_t end) {
  auto *parts = static_cast<Parts *>(captures);
  std::lock_guard<std::mutex> guard(parts->lock);
  parts->ranges.emplace_back(begin, end);
  for (int64_t i = begin; i < end; ++i)
    ++parts->visits[i];
}

/// The parts mrt_parallel_for makes of n iterations on `threads` threads,
/// sorted, after checking that each iteration ran once.
std::vector<std::pair<int64_t, int64_t>> partsOf(int64_t n, int threads) {
  Parts parts;
  parts.visits.assign(n, 0);
  int saved = omp_get_max_threads();
  omp_set_num_threads(threads);
  mrt_parallel_for(record, &parts, n);
  omp_set_num_threads(saved);
  for (int64_t i = 0; i < n; ++i)
    EXPECT_EQ(parts.visits[i], 1) << "iteration " << i;
  std::sort(parts.ranges.begin(), parts.ranges.end());
  return parts.ranges;
}

TEST(ParallelFor, OneContiguousPartPerThread) {
  auto parts = partsOf(1000, 3);
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts.front().first, 0);
  EXPECT_EQ(parts.back().second, 1000);
  for (size_t k = 1; k < parts.size(); ++k)
    EXPECT_EQ(parts[k - 1].second, parts[k].first);
}

TEST(ParallelFor, FewerIterationsThanThreadsRunEachOnce) {
  auto parts = partsOf(2, 4);
  EXPECT_EQ(parts.size(), 2u);
}

TEST(ParallelFor, OneThreadRunsTheWholeLoopAtOnce) {
  auto parts = partsOf(1000, 1);
  ASSERT_EQ(parts.size(), 1u);
  EXPECT_EQ(parts[0], std::make_pair(int64_t{0}, int64_t{1000}));
}

TEST(ParallelFor, NoIterationsRunNothing) {
  auto parts = partsOf(0, 2);
  for (auto [begin, end] : parts)
    EXPECT_EQ(begin, end);
}

} // namespace
