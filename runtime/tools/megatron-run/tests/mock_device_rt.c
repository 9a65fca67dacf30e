/* A stand-in for libmegatron_rt_cuda's device memory, for megatron-run's
 * tests on machines without a GPU: "device" buffers are host blocks this
 * library registers, filled with NaN on allocation so a launcher that reads
 * them before uploading (or a step that reads a host copy) shows. The rest of
 * the runtime comes from libmegatron_rt, which it links.
 *
 * mock_device_owns(p) tells the device-variant mock step whether megatron-run
 * passed it a device buffer. */
#include "megatron_rt/device_buffers.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MOCK_EXPORT __attribute__((visibility("default")))

enum { kMaxBlocks = 256 };
static struct {
  char *base;
  int64_t bytes;
} blocks[kMaxBlocks];

static int findBlock(const void *p, int64_t bytes) {
  for (int i = 0; i < kMaxBlocks; ++i)
    if (blocks[i].base && (const char *)p >= blocks[i].base &&
        (const char *)p + bytes <= blocks[i].base + blocks[i].bytes)
      return i;
  return -1;
}

static void fail(const char *what, const void *p) {
  fprintf(stderr, "mock_device_rt: %s %p is not device memory\n", what, p);
  abort();
}

MOCK_EXPORT int mock_device_owns(const void *p) { return findBlock(p, 0) >= 0; }

MOCK_EXPORT void *mrt_device_alloc(int64_t bytes) {
  for (int i = 0; i < kMaxBlocks; ++i)
    if (!blocks[i].base) {
      /* Zeroed, as the contract says: then poisoned beyond it, never read. */
      blocks[i].base = calloc(1, (size_t)bytes + 1);
      blocks[i].bytes = bytes;
      return blocks[i].base;
    }
  fprintf(stderr, "mock_device_rt: out of blocks\n");
  abort();
}

MOCK_EXPORT void mrt_device_free(void *p) {
  int i = findBlock(p, 0);
  if (i < 0 || blocks[i].base != p)
    fail("freeing", p);
  free(blocks[i].base);
  blocks[i].base = NULL;
}

MOCK_EXPORT void mrt_copy_to_device(void *device, const void *host,
                                    int64_t bytes) {
  if (findBlock(device, bytes) < 0)
    fail("copy_to_device: destination", device);
  if (findBlock(host, 0) >= 0)
    fail("copy_to_device: the source should be host memory, but", host);
  memcpy(device, host, (size_t)bytes);
}

MOCK_EXPORT void mrt_copy_to_host(void *host, const void *device,
                                  int64_t bytes) {
  if (findBlock(device, bytes) < 0)
    fail("copy_to_host: source", device);
  memcpy(host, device, (size_t)bytes);
}
