// PTX the emulator does not implement: transform.py must stop the build.
__device__ float loadNonCoherent(const float *p) {
  float v;
  asm volatile("ld.global.nc.f32 %0, [%1];" : "=f"(v) : "l"(p));
  return v;
}
