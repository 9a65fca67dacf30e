// Collectives under mpirun: every rank runs every test, in the same order, so
// the collectives inside them match up. Usage: megatron-rt-comm-tests <tp>
// <dp>, the mesh the launched world must make.
#include "megatron_rt/comm.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

mrt_context *ctx = nullptr;
int64_t expectedDp = 0;

int64_t tpRank() { return mrt_axis_rank(ctx, MRT_AXIS_TP); }
int64_t tpSize() { return mrt_axis_size(ctx, MRT_AXIS_TP); }

int64_t dpRank() { return mrt_axis_rank(ctx, MRT_AXIS_DP); }
int64_t dpSize() { return mrt_axis_size(ctx, MRT_AXIS_DP); }

// World rank r is (r / tp, r % tp): tensor-parallel neighbours.
TEST(CommTest, MeshKeepsTensorParallelRanksNeighbours) {
  EXPECT_EQ(dpSize(), expectedDp);
  EXPECT_EQ(dpRank(), mrt_world_rank(ctx) / tpSize());
  EXPECT_EQ(tpRank(), mrt_world_rank(ctx) % tpSize());
}

TEST(CommTest, AllReduceSum) {
  const int64_t n = 1037;
  std::vector<float> buf(n);
  for (int64_t i = 0; i < n; ++i)
    buf[i] = tpRank() * 1000.0f + i;
  mrt_all_reduce_f32(ctx, MRT_AXIS_TP, buf.data(), n, MRT_REDUCE_SUM);
  const int64_t size = tpSize();
  for (int64_t i = 0; i < n; ++i)
    ASSERT_EQ(buf[i], 1000.0f * size * (size - 1) / 2 + size * i) << i;
}

TEST(CommTest, AllReduceMax) {
  const int64_t n = 37;
  std::vector<float> buf(n);
  // Element i's maximum lives on rank i % size; the others are negative.
  for (int64_t i = 0; i < n; ++i)
    buf[i] = i % tpSize() == tpRank() ? float(i) : -1.0f - tpRank();
  mrt_all_reduce_f32(ctx, MRT_AXIS_TP, buf.data(), n, MRT_REDUCE_MAX);
  for (int64_t i = 0; i < n; ++i)
    ASSERT_EQ(buf[i], float(i)) << i;
}

// Over dp, the ranks holding the same tensor-parallel rank reduce together
// (with dp = 1, each rank alone: the identity).
TEST(CommTest, AllReduceOverDataParallelAxisSumsOneTensorParallelRank) {
  std::vector<float> buf = {1.5f, float(dpRank()), float(tpRank())};
  mrt_all_reduce_f32(ctx, MRT_AXIS_DP, buf.data(), buf.size(), MRT_REDUCE_SUM);
  const float dp = float(dpSize());
  EXPECT_EQ(buf, (std::vector<float>{1.5f * dp, dp * (dp - 1) / 2,
                                     float(tpRank()) * dp}));
}

// Every sub-axis of tp (stride s, size n, s * n dividing tp): its ranks are
// the tp ranks with the same t / (s * n) and t % s, indexed by (t / s) % n;
// a sum over it adds exactly theirs.
TEST(CommTest, SubAxesOfTensorParallelSumTheirGroups) {
  const int64_t tp = tpSize(), t = tpRank();
  int tested = 0;
  for (int64_t stride = 1; stride < tp; ++stride)
    for (int64_t size = 2; stride * size <= tp; ++size) {
      if (tp % (stride * size) != 0 || (stride == 1 && size == tp))
        continue;
      const int axis = MRT_AXIS_TP_SUB(stride, size);
      EXPECT_EQ(mrt_axis_size(ctx, axis), size);
      EXPECT_EQ(mrt_axis_rank(ctx, axis), (t / stride) % size);
      float sum = float(t);
      mrt_all_reduce_f32(ctx, axis, &sum, 1, MRT_REDUCE_SUM);
      float expected = 0;
      for (int64_t other = 0; other < tp; ++other)
        if (other / (stride * size) == t / (stride * size) &&
            other % stride == t % stride)
          expected += float(other);
      EXPECT_EQ(sum, expected) << "stride " << stride << " size " << size;
      ++tested;
    }
  // tp = 4 has two: (1, 2) and (2, 2); tp = 2 none.
  EXPECT_EQ(tested, tp == 4 ? 2 : 0);
}

// Started sums complete at their wait, each as its blocking all-reduce
// would, over its axis; a blocking collective issued between a start and its
// wait runs after the started one on every rank, and a wait completes every
// earlier start.
TEST(CommTest, StartedSumsCompleteInIssueOrder) {
  for (int axis : {MRT_AXIS_TP, MRT_AXIS_DP}) {
    const int64_t rank = mrt_axis_rank(ctx, axis),
                  size = mrt_axis_size(ctx, axis);
    std::vector<float> a(1037, 1.0f + rank), b = {2.0f * rank, 3.0f};
    float blocking = float(rank);
    int64_t first =
        mrt_all_reduce_start_f32(ctx, axis, a.data(), int64_t(a.size()),
                                 MRT_REDUCE_SUM);
    mrt_all_reduce_f32(ctx, axis, &blocking, 1, MRT_REDUCE_MAX);
    int64_t second = mrt_all_reduce_start_f32(ctx, axis, b.data(),
                                              int64_t(b.size()), MRT_REDUCE_SUM);
    EXPECT_LT(first, second);
    mrt_collective_wait(ctx, second);
    const float ranks = float(size), rankSum = size * (size - 1) / 2.0f;
    EXPECT_EQ(a, std::vector<float>(1037, ranks + rankSum)) << axis;
    EXPECT_EQ(b, (std::vector<float>{2.0f * rankSum, 3.0f * ranks})) << axis;
    EXPECT_EQ(blocking, float(size - 1)) << axis;
  }
}

// A started bf16 sum is rounded back into its buffer by its wait.
TEST(CommTest, StartedBf16SumIsNarrowedAtItsWait) {
  const int64_t size = mrt_axis_size(ctx, MRT_AXIS_TP);
  std::vector<mrt_bf16> v(33, 0x3f80); // 1.0
  mrt_collective_wait(ctx, mrt_all_reduce_start_bf16(ctx, MRT_AXIS_TP, v.data(),
                                                     int64_t(v.size()),
                                                     MRT_REDUCE_SUM));
  float expected = float(size);
  uint32_t bits;
  std::memcpy(&bits, &expected, sizeof(bits));
  for (mrt_bf16 x : v)
    EXPECT_EQ(x, uint16_t(bits >> 16));
}

// The time spent waiting is counted, and only grows.
TEST(CommTest, ExposedCommunicationOnlyGrows) {
  double before = mrt_exposed_comm_seconds(ctx);
  float value = 1.0f;
  mrt_all_reduce_f32(ctx, MRT_AXIS_TP, &value, 1, MRT_REDUCE_SUM);
  EXPECT_GT(mrt_exposed_comm_seconds(ctx), before);
}

std::vector<float> rankPattern(int64_t rank, int64_t n) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i)
    v[i] = rank * 100.0f + i * 0.5f;
  return v;
}

TEST(CommTest, AllGatherConcatenatesInRankOrder) {
  const int64_t n = 17;
  std::vector<float> in = rankPattern(tpRank(), n), out(n * tpSize());
  mrt_all_gather_f32(ctx, MRT_AXIS_TP, in.data(), out.data(), n);
  for (int64_t r = 0; r < tpSize(); ++r)
    EXPECT_EQ(
        std::vector<float>(out.begin() + r * n, out.begin() + (r + 1) * n),
        rankPattern(r, n));
}

TEST(CommTest, AllGatherInPlace) {
  const int64_t n = 17;
  std::vector<float> out(n * tpSize(), -1.0f);
  std::vector<float> mine = rankPattern(tpRank(), n);
  std::copy(mine.begin(), mine.end(), out.begin() + tpRank() * n);
  mrt_all_gather_f32(ctx, MRT_AXIS_TP, out.data() + tpRank() * n, out.data(),
                     n);
  for (int64_t r = 0; r < tpSize(); ++r)
    EXPECT_EQ(
        std::vector<float>(out.begin() + r * n, out.begin() + (r + 1) * n),
        rankPattern(r, n));
}

TEST(CommTest, ReduceScatterSumsChunkOfRank) {
  const int64_t n = 23, size = tpSize();
  // in[k] = (rank + 1) * k, so chunk r sums to size(size+1)/2 * k.
  std::vector<float> in(n * size), out(n);
  for (int64_t k = 0; k < n * size; ++k)
    in[k] = float((tpRank() + 1) * k);
  mrt_reduce_scatter_f32(ctx, MRT_AXIS_TP, in.data(), out.data(), n);
  for (int64_t i = 0; i < n; ++i)
    ASSERT_EQ(out[i], float(size * (size + 1) / 2 * (tpRank() * n + i))) << i;
}

// A started reduce-scatter, in place, behind a started sum: this rank's
// chunk of the sums lands at the buffer's start once its wait returns.
TEST(CommTest, StartedReduceScatterLeavesChunkOfRankFirst) {
  const int64_t n = 23, size = tpSize();
  std::vector<float> sum(5, 1.0f), buf(n * size);
  for (int64_t k = 0; k < n * size; ++k)
    buf[k] = float((tpRank() + 1) * k);
  int64_t first = mrt_all_reduce_start_f32(ctx, MRT_AXIS_TP, sum.data(),
                                           int64_t(sum.size()), MRT_REDUCE_SUM);
  int64_t second =
      mrt_reduce_scatter_start_f32(ctx, MRT_AXIS_TP, buf.data(), n);
  EXPECT_LT(first, second);
  mrt_collective_wait(ctx, second);
  EXPECT_EQ(sum, std::vector<float>(5, float(size)));
  for (int64_t i = 0; i < n; ++i)
    ASSERT_EQ(buf[i], float(size * (size + 1) / 2 * (tpRank() * n + i))) << i;
}

// A started all-gather, in place: each rank's chunk, at its place in the
// buffer, reaches every rank; bf16 chunks move as they are.
TEST(CommTest, StartedAllGatherFillsEveryChunk) {
  const int64_t n = 19, size = tpSize(), rank = tpRank();
  std::vector<float> buf(n * size, -1.0f);
  std::vector<float> mine = rankPattern(rank, n);
  std::copy(mine.begin(), mine.end(), buf.begin() + rank * n);
  std::vector<mrt_bf16> halves(3 * size, 0);
  for (int64_t i = 0; i < 3; ++i)
    halves[rank * 3 + i] = mrt_bf16(0x3f80 + rank * 3 + i);
  mrt_all_gather_start_f32(ctx, MRT_AXIS_TP, buf.data(), n);
  mrt_collective_wait(
      ctx, mrt_all_gather_start_bf16(ctx, MRT_AXIS_TP, halves.data(), 3));
  for (int64_t r = 0; r < size; ++r) {
    EXPECT_EQ(std::vector<float>(buf.begin() + r * n, buf.begin() + (r + 1) * n),
              rankPattern(r, n));
    for (int64_t i = 0; i < 3; ++i)
      EXPECT_EQ(halves[r * 3 + i], mrt_bf16(0x3f80 + r * 3 + i));
  }
}

TEST(CommTest, BroadcastCopiesRootBytes) {
  struct Payload {
    int64_t step;
    double value;
    char tag[5];
  } payload{tpRank(), tpRank() * 1.25, "rank"};
  const int root = int(tpSize() - 1);
  mrt_broadcast_bytes(ctx, MRT_AXIS_TP, &payload, sizeof(payload), root);
  EXPECT_EQ(payload.step, root);
  EXPECT_EQ(payload.value, root * 1.25);
  EXPECT_STREQ(payload.tag, "rank");
}

} // namespace

int main(int argc, char **argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s <tp_size> <dp_size>\n", argv[0]);
    return 2;
  }
  expectedDp = std::atoll(argv[2]);
  char err[256];
  ctx = mrt_context_create(std::atoll(argv[1]), /*collective_timeout_s=*/0,
                           err, sizeof(err));
  if (!ctx) {
    std::fprintf(stderr, "%s\n", err);
    return 1;
  }
  int result = RUN_ALL_TESTS();
  mrt_context_destroy(ctx);
  return result;
}
