/* A library that exports a step's entry points but links no megatron
 * runtime, for megatron-run's load errors. */
#define EXPORT __attribute__((visibility("default")))

EXPORT const char *mgt_manifest(void) { return "{}"; }
EXPORT float mgt_forward(void *ctx, void **args) {
  (void)ctx, (void)args;
  return 0.0f;
}
