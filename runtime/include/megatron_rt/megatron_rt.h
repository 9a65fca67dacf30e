/* Umbrella header of the megatron-rt C runtime. */
#ifndef MEGATRON_RT_MEGATRON_RT_H
#define MEGATRON_RT_MEGATRON_RT_H

#include "megatron_rt/allocator.h"
#include "megatron_rt/attention.h"
#include "megatron_rt/comm.h"
#include "megatron_rt/cross_entropy.h"
#include "megatron_rt/embedding.h"
#include "megatron_rt/contract.h"
#include "megatron_rt/gemm.h"
#include "megatron_rt/layernorm.h"
#include "megatron_rt/optimizer.h"
#include "megatron_rt/parallel.h"
#include "megatron_rt/reduce.h"
#include "megatron_rt/rope.h"

#endif /* MEGATRON_RT_MEGATRON_RT_H */
