#include "Threads.h"

#include <omp.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <string>

namespace mrun {
namespace {

// A positive count from an environment variable, or 0.
int64_t positiveCount(const char *text) {
  if (!text || !*text)
    return 0;
  char *end = nullptr;
  const long long value = std::strtoll(text, &end, 10);
  return *end == '\0' && value > 0 ? value : 0;
}

// The ranks the launcher started on this node (1 without a launcher).
int64_t ranksOnThisNode() {
  for (const char *name : {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS",
                           "SLURM_NTASKS_PER_NODE"})
    if (const int64_t count = positiveCount(std::getenv(name)))
      return count;
  return 1;
}

int64_t boundCpuCount() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) != 0)
    return 0;
  return CPU_COUNT(&set);
}

} // namespace

int64_t chooseThreads(const char *ompNumThreads, int64_t boundCpus,
                      int64_t nodeCpus, int64_t ranksPerNode) {
  if (const int64_t told = positiveCount(ompNumThreads))
    return told;
  if (boundCpus > 0 && boundCpus < nodeCpus)
    return boundCpus;
  return std::max<int64_t>(1, nodeCpus / std::max<int64_t>(1, ranksPerNode));
}

CpuShare shareNodeCpus() {
  CpuShare share;
  share.ranksPerNode = ranksOnThisNode();
  share.cpusPerNode = std::max<long>(1, sysconf(_SC_NPROCESSORS_ONLN));
  share.threadsPerRank =
      chooseThreads(std::getenv("OMP_NUM_THREADS"), boundCpuCount(),
                    share.cpusPerNode, share.ranksPerNode);
  omp_set_num_threads(static_cast<int>(share.threadsPerRank));
  return share;
}

} // namespace mrun
