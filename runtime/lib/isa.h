// Internal: which instruction sets the CPU kernels are compiled for.
#ifndef MEGATRON_RT_LIB_ISA_H
#define MEGATRON_RT_LIB_ISA_H

// A kernel marked MRT_VECTOR_KERNEL is compiled three times on x86-64: for
// the portable baseline (SSE2), for x86-64-v3 (AVX2 + FMA, 8 floats a
// vector) and for x86-64-v4 (AVX-512, 16 floats), and the dynamic loader
// picks one by the CPU it runs on (an ifunc), so the installed runtime still
// loads on any x86-64 machine while the loops run as wide as the CPU allows
// (attention's tiles are 8 floats wide by their type in every copy). The
// kernel's OpenMP regions are cloned with it; `flatten` inlines the helpers
// it calls into each copy, as a helper compiled once would run at the
// baseline in all of them. GCC only: Clang 22 rejects flatten beside
// target_clones and, without it, leaves the clones' internal helpers
// undefined at link time, so the Clang build (the sanitizer build, which
// checks correctness, not speed) stays on the baseline. The copies may
// round differently (fused multiply-adds, the order of vector sums), as BLAS
// kernels for two CPUs do. vec.h's exp takes a floor, one vector
// instruction in the v3 and v4 copies and scalar code on the baseline, so
// the kernels whose time is its loops (the cross-entropy, GELU, attention's
// softmax) want those copies most.
#if defined(__x86_64__) && !defined(__clang__)
#define MRT_VECTOR_KERNEL                                                      \
  __attribute__((flatten,                                                      \
                 target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define MRT_VECTOR_KERNEL
#endif

#endif // MEGATRON_RT_LIB_ISA_H
