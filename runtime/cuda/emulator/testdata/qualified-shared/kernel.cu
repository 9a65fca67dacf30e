// A qualified __shared__ declaration: transform.py must stop the build.
__global__ void kernel() {
  static __shared__ float partials[8];
  partials[0] = 0.0f;
}
