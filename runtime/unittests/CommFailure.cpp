// Programs that must fail under mpirun, run by expect_failure.sh:
//   tp-mismatch <tp>  context creation with the wrong tp_size
//   rank-exit <tp>    rank 1 exits mid-run while rank 0 waits in an all-reduce
//   mpi-error <tp>    a collective fails inside MPI (invalid broadcast root)
//   rank-stops <tp>   rank 1 stops (SIGSTOP) while the others all-reduce over
//                     dp (tp=1) or tp: the 2 s collective timeout ends the job
//   started-stops <tp> the same while the others wait for started sums
//   wait-unstarted <tp>  a wait for a ticket no start returned
//   unknown-axis <tp>  an all-reduce over a sub-axis tp does not factor into
// Each returns 0 only if the failure it provokes did not happen.
#include "megatron_rt/comm.h"

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <unistd.h>

namespace {

mrt_context *createOrExit(int64_t tp, double timeout) {
  char err[256];
  mrt_context *ctx = mrt_context_create(tp, timeout, err, sizeof(err));
  if (!ctx) {
    std::fprintf(stderr, "%s\n", err);
    std::exit(1);
  }
  return ctx;
}

void rankExitsDuringAllReduce(mrt_context *ctx) {
  float value = 1.0f;
  mrt_all_reduce_f32(ctx, MRT_AXIS_TP, &value, 1, MRT_REDUCE_SUM);
  if (mrt_world_rank(ctx) == 1) {
    sleep(1); // let rank 0 enter the all-reduce first
    std::exit(3);
  }
  // Rank 1 never joins: only the launcher can end this wait.
  mrt_all_reduce_f32(ctx, MRT_AXIS_TP, &value, 1, MRT_REDUCE_SUM);
}

// Nothing but the timeout can end rank 0's wait: rank 1 neither exits nor
// answers, as a rank stuck in a kernel or a debugger. Returns the axis the
// others then reduce over: tp when it joins ranks 0 and 1, else dp.
int stopRankOne(mrt_context *ctx) {
  if (mrt_world_rank(ctx) == 1)
    raise(SIGSTOP);
  return mrt_axis_size(ctx, MRT_AXIS_TP) > 1 ? MRT_AXIS_TP : MRT_AXIS_DP;
}

void rankStopsDuringAllReduce(mrt_context *ctx) {
  const int axis = stopRankOne(ctx);
  float value = 1.0f;
  mrt_all_reduce_f32(ctx, axis, &value, 1, MRT_REDUCE_SUM);
}

void rankStopsDuringStartedSums(mrt_context *ctx) {
  const int axis = stopRankOne(ctx);
  float a = 1.0f, b = 2.0f;
  mrt_all_reduce_start_f32(ctx, axis, &a, 1, MRT_REDUCE_SUM);
  mrt_collective_wait(
      ctx, mrt_all_reduce_start_f32(ctx, axis, &b, 1, MRT_REDUCE_SUM));
}

void waitForUnstartedTicket(mrt_context *ctx) { mrt_collective_wait(ctx, 7); }

// tp=2 has no sub-axis of 2 ranks 2 apart.
void allReduceOverUnknownAxis(mrt_context *ctx) {
  float value = 1.0f;
  mrt_all_reduce_f32(ctx, MRT_AXIS_TP_SUB(2, 2), &value, 1, MRT_REDUCE_SUM);
}

void broadcastFromInvalidRoot(mrt_context *ctx) {
  char byte = 0;
  mrt_broadcast_bytes(ctx, MRT_AXIS_TP, &byte, 1, 1 << 20);
}

} // namespace

int main(int argc, char **argv) {
  if (argc != 3) {
    std::fprintf(stderr,
                 "usage: %s tp-mismatch|rank-exit|mpi-error|rank-stops|"
                 "started-stops|wait-unstarted|unknown-axis <tp>\n",
                 argv[0]);
    return 2;
  }
  const bool stops = std::strcmp(argv[1], "rank-stops") == 0,
             startedStops = std::strcmp(argv[1], "started-stops") == 0;
  mrt_context *ctx =
      createOrExit(std::atoll(argv[2]), stops || startedStops ? 2.0 : 0.0);
  if (stops)
    rankStopsDuringAllReduce(ctx);
  else if (startedStops)
    rankStopsDuringStartedSums(ctx);
  else if (std::strcmp(argv[1], "wait-unstarted") == 0)
    waitForUnstartedTicket(ctx);
  else if (std::strcmp(argv[1], "unknown-axis") == 0)
    allReduceOverUnknownAxis(ctx);
  else if (std::strcmp(argv[1], "rank-exit") == 0)
    rankExitsDuringAllReduce(ctx);
  else if (std::strcmp(argv[1], "mpi-error") == 0)
    broadcastFromInvalidRoot(ctx);
  mrt_context_destroy(ctx);
  return 0;
}
