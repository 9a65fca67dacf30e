/* Single-rank stand-in for Open MPI 4.x's libmpi.so.40, for running
 * megatron-run at TP=1 on a machine without MPI (the GPU benchmark machine).
 *
 * Why: a real Open MPI cannot travel in the benchmark bundle. Even a
 * one-process MPI_Init ("singleton") forks /usr/bin/orted and dlopens about a
 * hundred plugins (plus PMIx's and hwloc's) from paths fixed at configure
 * time. At one rank every collective is a copy or nothing, so this library
 * implements exactly that, with Open MPI's ABI: handles are addresses of the
 * predefined objects (ompi_mpi_comm_world, ompi_mpi_float, ...), MPI_IN_PLACE
 * is (void *)1, MPI_SUCCESS is 0.
 *
 * Copies go through cudaMemcpy(..., cudaMemcpyDefault) when libcudart is
 * already loaded in the process, so device buffers work as well as host ones
 * (with unified addressing the runtime tells them apart); otherwise memcpy.
 *
 * prepare.sh compiles it as bundle/lib/libmpi.so.40 and checks that every
 * MPI symbol the bundled binaries import is defined here.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define EXPORT __attribute__((visibility("default")))

/* Predefined objects. Sizes are Open MPI 4.1's (nm -S libmpi.so.40), so that
 * an executable with a copy relocation against one gets the size it expects. */
EXPORT char ompi_mpi_comm_world[0x200];
EXPORT char ompi_mpi_comm_self[0x200];
EXPORT char ompi_mpi_comm_null[0x200];
EXPORT char ompi_mpi_byte[0x200];
EXPORT char ompi_mpi_char[0x200];
EXPORT char ompi_mpi_int[0x200];
EXPORT char ompi_mpi_unsigned[0x200];
EXPORT char ompi_mpi_long[0x200];
EXPORT char ompi_mpi_long_long_int[0x200];
EXPORT char ompi_mpi_int8_t[0x200];
EXPORT char ompi_mpi_uint8_t[0x200];
EXPORT char ompi_mpi_int32_t[0x200];
EXPORT char ompi_mpi_int64_t[0x200];
EXPORT char ompi_mpi_uint64_t[0x200];
EXPORT char ompi_mpi_float[0x200];
EXPORT char ompi_mpi_double[0x200];
EXPORT char ompi_mpi_op_sum[0x800];
EXPORT char ompi_mpi_op_max[0x800];
EXPORT char ompi_mpi_op_min[0x800];
EXPORT char ompi_mpi_op_prod[0x800];
EXPORT char ompi_mpi_errors_return[0x100];
EXPORT char ompi_mpi_errors_are_fatal[0x100];
EXPORT char ompi_mpi_info_null[0x100];
EXPORT char ompi_request_empty[0xa0];
EXPORT char ompi_request_null[0x100];

#define MPI_SUCCESS 0
#define MPI_ERR_TYPE 3
#define MPI_ERR_COMM 5
#define MPI_IN_PLACE ((const void *)1)
#define MPI_MAX_ERROR_STRING 256

static int initialised, finalised;

/* Bytes of one element of a predefined datatype; 0 for an unknown one. */
static size_t type_size(const void *type) {
  static const struct {
    const void *type;
    size_t size;
  } sizes[] = {
      {ompi_mpi_byte, 1},          {ompi_mpi_char, 1},
      {ompi_mpi_int8_t, 1},        {ompi_mpi_uint8_t, 1},
      {ompi_mpi_int, 4},           {ompi_mpi_unsigned, 4},
      {ompi_mpi_int32_t, 4},       {ompi_mpi_float, 4},
      {ompi_mpi_long, 8},          {ompi_mpi_long_long_int, 8},
      {ompi_mpi_int64_t, 8},       {ompi_mpi_uint64_t, 8},
      {ompi_mpi_double, 8},
  };
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; ++i)
    if (sizes[i].type == type)
      return sizes[i].size;
  return 0;
}

/* memcpy that also handles device pointers once the CUDA runtime is loaded
 * (the step loads it; we only look it up, never load it ourselves). */
static void copy_bytes(void *dst, const void *src, size_t bytes) {
  typedef int (*cuda_memcpy_fn)(void *, const void *, size_t, int);
  static cuda_memcpy_fn cuda_memcpy;
  static int looked_up;
  if (dst == src || bytes == 0)
    return;
  if (!looked_up) {
    void *cudart = dlopen("libcudart.so.13", RTLD_NOW | RTLD_NOLOAD);
    if (!cudart)
      cudart = dlopen("libcudart.so.12", RTLD_NOW | RTLD_NOLOAD);
    if (cudart)
      cuda_memcpy = (cuda_memcpy_fn)dlsym(cudart, "cudaMemcpy");
    /* Look again later if the runtime was not loaded yet. */
    looked_up = cuda_memcpy != NULL;
  }
  if (cuda_memcpy && cuda_memcpy(dst, src, bytes, 4 /* cudaMemcpyDefault */) == 0)
    return;
  memcpy(dst, src, bytes);
}

static int copy_elements(void *dst, const void *src, int count,
                         const void *type) {
  size_t size = type_size(type);
  if (size == 0)
    return MPI_ERR_TYPE;
  if (src != MPI_IN_PLACE && count > 0)
    copy_bytes(dst, src, (size_t)count * size);
  return MPI_SUCCESS;
}

EXPORT int MPI_Init(int *argc, char ***argv) {
  (void)argc, (void)argv;
  initialised = 1;
  return MPI_SUCCESS;
}

EXPORT int MPI_Init_thread(int *argc, char ***argv, int required,
                           int *provided) {
  (void)argc, (void)argv;
  initialised = 1;
  if (provided)
    *provided = required;
  return MPI_SUCCESS;
}

EXPORT int MPI_Query_thread(int *provided) {
  *provided = 3; /* MPI_THREAD_MULTIPLE: there is nothing to race on */
  return MPI_SUCCESS;
}

EXPORT int MPI_Initialized(int *flag) {
  *flag = initialised;
  return MPI_SUCCESS;
}

EXPORT int MPI_Finalized(int *flag) {
  *flag = finalised;
  return MPI_SUCCESS;
}

EXPORT int MPI_Finalize(void) {
  finalised = 1;
  return MPI_SUCCESS;
}

EXPORT int MPI_Abort(void *comm, int code) {
  (void)comm;
  fprintf(stderr, "MPI_Abort (single-rank stub): exit code %d\n", code);
  fflush(NULL);
  _Exit(code ? code : 1);
}

EXPORT int MPI_Error_string(int code, char *message, int *length) {
  int n = snprintf(message, MPI_MAX_ERROR_STRING,
                   "MPI error %d (single-rank stub)", code);
  *length = n < MPI_MAX_ERROR_STRING ? n : MPI_MAX_ERROR_STRING - 1;
  return MPI_SUCCESS;
}

EXPORT double MPI_Wtime(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

EXPORT int MPI_Get_processor_name(char *name, int *length) {
  strcpy(name, "localhost");
  *length = (int)strlen(name);
  return MPI_SUCCESS;
}

EXPORT int MPI_Comm_rank(void *comm, int *rank) {
  if (comm == ompi_mpi_comm_null)
    return MPI_ERR_COMM;
  *rank = 0;
  return MPI_SUCCESS;
}

EXPORT int MPI_Comm_size(void *comm, int *size) {
  if (comm == ompi_mpi_comm_null)
    return MPI_ERR_COMM;
  *size = 1;
  return MPI_SUCCESS;
}

/* Every communicator of one rank behaves alike, so duplicates and splits
 * share COMM_SELF's object (freeing one sets only the caller's handle). */
EXPORT int MPI_Comm_dup(void *comm, void **out) {
  (void)comm;
  *out = ompi_mpi_comm_self;
  return MPI_SUCCESS;
}

EXPORT int MPI_Comm_split(void *comm, int color, int key, void **out) {
  (void)comm, (void)key;
  *out = color < 0 ? (void *)ompi_mpi_comm_null : (void *)ompi_mpi_comm_self;
  return MPI_SUCCESS;
}

/* The ranks sharing this node: the one rank. */
EXPORT int MPI_Comm_split_type(void *comm, int type, int key, void *info,
                               void **out) {
  (void)comm, (void)type, (void)key, (void)info;
  *out = ompi_mpi_comm_self;
  return MPI_SUCCESS;
}

EXPORT int MPI_Comm_free(void **comm) {
  *comm = ompi_mpi_comm_null;
  return MPI_SUCCESS;
}

EXPORT int MPI_Comm_set_errhandler(void *comm, void *handler) {
  (void)comm, (void)handler;
  return MPI_SUCCESS;
}

EXPORT int MPI_Barrier(void *comm) {
  (void)comm;
  return MPI_SUCCESS;
}

EXPORT int MPI_Bcast(void *buf, int count, void *type, int root, void *comm) {
  (void)buf, (void)count, (void)root, (void)comm;
  return type_size(type) ? MPI_SUCCESS : MPI_ERR_TYPE;
}

EXPORT int MPI_Allreduce(const void *in, void *out, int count, void *type,
                         void *op, void *comm) {
  (void)op, (void)comm;
  return copy_elements(out, in, count, type);
}

EXPORT int MPI_Reduce(const void *in, void *out, int count, void *type,
                      void *op, int root, void *comm) {
  (void)op, (void)root, (void)comm;
  return copy_elements(out, in, count, type);
}

EXPORT int MPI_Allgather(const void *in, int incount, void *intype, void *out,
                         int outcount, void *outtype, void *comm) {
  (void)incount, (void)intype, (void)comm;
  return copy_elements(out, in, outcount, outtype);
}

/* One rank's block is the whole result; in place it is already there. */
EXPORT int MPI_Reduce_scatter_block(const void *in, void *out, int count,
                                    void *type, void *op, void *comm) {
  (void)op, (void)comm;
  return copy_elements(out, in, count, type);
}

EXPORT int MPI_Reduce_scatter(const void *in, void *out, const int *counts,
                              void *type, void *op, void *comm) {
  (void)op, (void)comm;
  return copy_elements(out, in, counts[0], type);
}

/* Non-blocking all-reduce (the overlapped collectives' start): at one rank it
 * completes at once. Open MPI hands such a request back as
 * &ompi_request_empty, and MPI_Test retires a request by setting it to
 * MPI_REQUEST_NULL, which is &ompi_request_null. */
EXPORT int MPI_Iallreduce(const void *in, void *out, int count, void *type,
                          void *op, void *comm, void **request) {
  (void)op, (void)comm;
  *request = ompi_request_empty;
  return copy_elements(out, in, count, type);
}

/* Non-blocking reduce-scatter (ZeRO-1's started gradient reduction): one
 * rank's block is the whole result, complete at once, as above. */
EXPORT int MPI_Ireduce_scatter_block(const void *in, void *out, int count,
                                     void *type, void *op, void *comm,
                                     void **request) {
  (void)op, (void)comm;
  *request = ompi_request_empty;
  return copy_elements(out, in, count, type);
}

/* Non-blocking all-gather (ZeRO-1's started parameter gather), in place at
 * one rank: nothing to move. */
EXPORT int MPI_Iallgather(const void *in, int incount, void *intype, void *out,
                          int outcount, void *outtype, void *comm,
                          void **request) {
  (void)incount, (void)intype, (void)comm;
  *request = ompi_request_empty;
  return copy_elements(out, in, outcount, outtype);
}

EXPORT int MPI_Test(void **request, int *flag, void *status) {
  (void)status; /* MPI_STATUS_IGNORE or a status nobody reads at one rank */
  *request = ompi_request_null;
  *flag = 1;
  return MPI_SUCCESS;
}
