// How the ranks on one node share its cores. A rank starts as many OpenMP
// threads as it is given CPUs: mpirun -np 4 on a 4-core node would otherwise
// run 16 threads on 4 cores, each rank's GEMMs fighting the others'. As
// torchrun does, megatron-run gives each rank an equal share of the node's
// CPUs unless OMP_NUM_THREADS says otherwise.
#ifndef MEGATRON_RUN_THREADS_H
#define MEGATRON_RUN_THREADS_H

#include <cstdint>

namespace mrun {

// What the OpenMP threads of this rank run on, for the peak an MFU divides
// by: its threads, the ranks on its node and the node's CPUs.
struct CpuShare {
  int64_t threadsPerRank = 1;
  int64_t ranksPerNode = 1;
  int64_t cpusPerNode = 1;
};

// The threads a rank runs: OMP_NUM_THREADS when set (`ompNumThreads`, else
// null); the CPUs the launcher bound the rank to, when fewer than the
// node's; otherwise an equal share of the node's, at least one.
int64_t chooseThreads(const char *ompNumThreads, int64_t boundCpus,
                      int64_t nodeCpus, int64_t ranksPerNode);

// Sets this rank's OpenMP threads as chooseThreads decides, from the
// environment the launcher gave it (OMPI_COMM_WORLD_LOCAL_SIZE,
// MPI_LOCALNRANKS, SLURM_NTASKS_PER_NODE), and returns the share.
CpuShare shareNodeCpus();

} // namespace mrun

#endif // MEGATRON_RUN_THREADS_H
