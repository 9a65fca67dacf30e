/* A stand-in for a compiled step.so, for megatron-run's tests.
 *
 * Compiled with -DMOCK_TP=1 or 2. Its manifest describes a tiny GPT-2-like
 * model (padded vocabulary, fused QKV split in 3 sections, row- and
 * column-split weights, replicated layer norms) plus input_ids/targets.
 * mgt_forward gathers every parameter into its GLOBAL tensor (local slice
 * placed by this file's own implementation of the slicing rule, then an
 * all-reduce sum over TP), checks that padding is zero, and returns a
 * checksum of the global tensors and the batch, so every rank and every TP
 * size returns the same value for the same weights and data.
 *
 * Environment:
 *   MOCK_DUMP_DIR=D    rank 0 writes D/step<k>.txt at its k-th call: one line
 *                      "name n v0 v1 ..." per arg (global tensor restricted to
 *                      checkpoint_shape, row-major; floats with %.9g)
 *   MOCK_BREAK_RANK=r  world rank r's manifest renames h.0.ln_1.weight to
 *                      h.0.ln_9.weight (a failure only that rank sees)
 *   MOCK_EXIT_RANK=r   world rank r exits with status 3 inside mgt_forward
 */
#include "megatron_rt/comm.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef MOCK_TP
#define MOCK_TP 1
#endif

#define MOCK_EXPORT __attribute__((visibility("default")))

enum { MAXDIM = 2, NARGS = 12, BATCH = 2, SEQ = 3, VOCAB = 10 };
/* The padded vocabulary depends on TP (as in the compiler: a multiple of a
 * TP-dependent size); the checkpoint holds only VOCAB rows. */
#define VPAD (MOCK_TP == 1 ? 12 : 16)

typedef struct {
  const char *name, *role;
  int ndim;
  long global[MAXDIM], ckpt[MAXDIM];
  int split_dim; /* -1: replicated */
  int sections;
} MockArg;

static const MockArg kArgs[NARGS] = {
    {"wte.weight", "param", 2, {VPAD, 4}, {VOCAB, 4}, 0, 1},
    {"wpe.weight", "param", 2, {3, 4}, {3, 4}, -1, 1},
    {"h.0.ln_1.weight", "param", 1, {4}, {4}, -1, 1},
    {"h.0.ln_1.bias", "param", 1, {4}, {4}, -1, 1},
    {"h.0.attn.c_attn.weight", "param", 2, {4, 12}, {4, 12}, 1, 3},
    {"h.0.attn.c_attn.bias", "param", 1, {12}, {12}, 0, 3},
    {"h.0.attn.c_proj.weight", "param", 2, {4, 4}, {4, 4}, 0, 1},
    {"h.1.mlp.c_proj.weight", "param", 2, {8, 4}, {8, 4}, 0, 1},
    {"ln_f.weight", "param", 1, {4}, {4}, -1, 1},
    {"ln_f.bias", "param", 1, {4}, {4}, -1, 1},
    {"input_ids", "input_ids", 2, {BATCH, SEQ}, {BATCH, SEQ}, -1, 1},
    {"targets", "targets", 2, {BATCH, SEQ}, {BATCH, SEQ}, -1, 1},
};

static int envInt(const char *name) {
  const char *v = getenv(name);
  return v && *v ? atoi(v) : -1;
}

/* The world rank before MPI is initialised (mgt_manifest runs first). */
static int launcherRank(void) {
  int r = envInt("OMPI_COMM_WORLD_RANK");
  return r >= 0 ? r : envInt("PMI_RANK");
}

static long localDim(const MockArg *a, int d) {
  return d == a->split_dim ? a->global[d] / MOCK_TP : a->global[d];
}

static void appendShape(char **p, const long *shape, int ndim) {
  *p += sprintf(*p, "[");
  for (int d = 0; d < ndim; ++d)
    *p += sprintf(*p, "%s%ld", d ? ", " : "", shape[d]);
  *p += sprintf(*p, "]");
}

MOCK_EXPORT const char *mgt_manifest(void) {
  static char buf[8192];
  char *p = buf;
  const int broken = launcherRank() >= 0 && launcherRank() == envInt("MOCK_BREAK_RANK");
  p += sprintf(p,
               "{\"format\": \"megatron-step\", \"version\": 1, \"model\": "
               "\"mock\", \"tp\": %d, \"batch\": %d, \"seq\": %d, "
               "\"valid_vocab\": %d, \"args\": [",
               MOCK_TP, BATCH, SEQ, VOCAB);
  for (int i = 0; i < NARGS; ++i) {
    const MockArg *a = &kArgs[i];
    long local[MAXDIM];
    for (int d = 0; d < a->ndim; ++d)
      local[d] = localDim(a, d);
    const char *name = a->name;
    if (broken && strcmp(name, "h.0.ln_1.weight") == 0)
      name = "h.0.ln_9.weight";
    p += sprintf(p, "%s\n {\"name\": \"%s\", \"role\": \"%s\", \"dtype\": \"%s\", "
                 "\"global_shape\": ",
                 i ? "," : "", name, a->role,
                 strcmp(a->role, "param") ? "i32" : "f32");
    appendShape(&p, a->global, a->ndim);
    p += sprintf(p, ", \"local_shape\": ");
    appendShape(&p, local, a->ndim);
    if (strcmp(a->role, "param") == 0) {
      p += sprintf(p, ", \"checkpoint_shape\": ");
      appendShape(&p, a->ckpt, a->ndim);
    }
    if (a->split_dim >= 0)
      p += sprintf(p, ", \"split\": [{\"dim\": %d, \"axis\": \"tp\", "
                   "\"sections\": %d}]}",
                   a->split_dim, a->sections);
    else
      p += sprintf(p, ", \"split\": []}");
  }
  sprintf(p, "]}\n");
  return buf;
}

/* Independent implementation of the slicing rule: local -> global index. */
static long toGlobal(const MockArg *a, int d, long l, long rank) {
  if (d != a->split_dim)
    return l;
  const long chunk = a->global[d] / (a->sections * MOCK_TP);
  const long s = l / chunk;
  return s * (a->global[d] / a->sections) + rank * chunk + l % chunk;
}

MOCK_EXPORT float mgt_forward(mrt_context *ctx, void **args) {
  static int calls = 0;
  const long rank = (long)mrt_axis_rank(ctx, MRT_AXIS_TP);
  if (mrt_world_rank(ctx) == envInt("MOCK_EXIT_RANK")) {
    fprintf(stderr, "mock_step: rank %ld exits in mgt_forward\n", rank);
    exit(3);
  }
  const char *dumpDir = getenv("MOCK_DUMP_DIR");
  FILE *dump = NULL;
  if (dumpDir && mrt_world_rank(ctx) == 0) {
    char path[4096];
    snprintf(path, sizeof(path), "%s/step%d.txt", dumpDir, calls);
    dump = fopen(path, "w");
    if (!dump) {
      perror(path);
      exit(4);
    }
  }
  ++calls;
  double sum = 0.0;
  int paddingOk = 1; /* padding zero and replicas equal */
  for (int i = 0; i < NARGS; ++i) {
    const MockArg *a = &kArgs[i];
    const long cols = a->ndim == 2 ? a->global[1] : 1;
    const long rows = a->global[0];
    const long lrows = localDim(a, 0), lcols = a->ndim == 2 ? localDim(a, 1) : 1;
    const long ccols = a->ndim == 2 ? a->ckpt[1] : 1;
    if (strcmp(a->role, "param") != 0) {
      const int *ids = (const int *)args[i];
      if (dump)
        fprintf(dump, "%s %d", a->name, BATCH * SEQ);
      for (long j = 0; j < BATCH * SEQ; ++j) {
        sum += (double)ids[j] * (double)(j + 1) * (i == 10 ? 1e-3 : 1e-4);
        if (dump)
          fprintf(dump, " %d", ids[j]);
      }
      if (dump)
        fprintf(dump, "\n");
      continue;
    }
    float *g = calloc((size_t)(rows * cols), sizeof(float));
    const float *local = (const float *)args[i];
    if (a->split_dim < 0) {
      /* Replicated: every rank must hold the same values (max == -max(-x)). */
      float *hi = malloc((size_t)(rows * cols) * sizeof(float));
      float *lo = malloc((size_t)(rows * cols) * sizeof(float));
      for (long k = 0; k < rows * cols; ++k) {
        hi[k] = local[k];
        lo[k] = -local[k];
      }
      mrt_all_reduce_f32(ctx, MRT_AXIS_TP, hi, rows * cols, MRT_REDUCE_MAX);
      mrt_all_reduce_f32(ctx, MRT_AXIS_TP, lo, rows * cols, MRT_REDUCE_MAX);
      for (long k = 0; k < rows * cols; ++k)
        if (hi[k] != -lo[k]) {
          fprintf(stderr, "mock_step: replicas of %s differ\n", a->name);
          paddingOk = 0;
          break;
        }
      memcpy(g, hi, (size_t)(rows * cols) * sizeof(float));
      free(hi);
      free(lo);
    } else {
      for (long r = 0; r < lrows; ++r)
        for (long c = 0; c < lcols; ++c)
          g[toGlobal(a, 0, r, rank) * cols +
            (a->ndim == 2 ? toGlobal(a, 1, c, rank) : 0)] = local[r * lcols + c];
      mrt_all_reduce_f32(ctx, MRT_AXIS_TP, g, rows * cols, MRT_REDUCE_SUM);
    }
    if (dump)
      fprintf(dump, "%s %ld", a->name, a->ckpt[0] * ccols);
    for (long r = 0; r < rows; ++r)
      for (long c = 0; c < cols; ++c) {
        const float v = g[r * cols + c];
        if (r >= a->ckpt[0] || c >= ccols) {
          if (v != 0.0f) {
            fprintf(stderr, "mock_step: %s[%ld,%ld] = %g is padding but not 0\n",
                    a->name, r, c, v);
            paddingOk = 0;
          }
          continue;
        }
        const long k = r * ccols + c; /* checkpoint flat index */
        sum += (double)v * (double)(1 + (k + 3 * i) % 7);
        if (dump)
          fprintf(dump, " %.9g", v);
      }
    if (dump)
      fprintf(dump, "\n");
    free(g);
  }
  if (dump)
    fclose(dump);
  return paddingOk ? (float)sum : NAN;
}
