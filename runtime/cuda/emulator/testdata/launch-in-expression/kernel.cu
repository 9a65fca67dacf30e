// A launch that is not a statement of its own: transform.py must stop the
// build rather than rewrite half of it.
__global__ void kernel(int *x) {}

void launchTwice(int *x) { kernel<<<1, 32>>>(x), kernel<<<1, 32>>>(x); }
