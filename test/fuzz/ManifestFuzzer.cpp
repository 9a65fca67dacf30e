//===- ManifestFuzzer.cpp - libFuzzer target: step manifests -------------===//
//
// Each input is a step library's manifest (the JSON mgt_manifest returns),
// parsed and checked as megatron-run does. A manifest it accepts must be one
// the launcher can use: every arg's slice exists for every rank of the mesh
// it names, and has the local shape the manifest states. Every input must
// end in that or in a std::runtime_error; any other exception, a slice
// that does not match, a crash or a sanitizer report is a bug.
//
//===----------------------------------------------------------------------===//
#include "Manifest.h"

#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace {

// Every rank's view of every arg, as Buffers and the checkpoint readers take
// it; the slicing rule throws std::invalid_argument where the manifest's
// checks let through a split the rule cannot cut.
void sliceEveryArg(const mrun::Manifest &manifest) {
  for (const mrun::Arg &arg : manifest.args)
    for (int64_t dp = 0; dp < manifest.dp; ++dp)
      for (int64_t tp = 0; tp < manifest.tp; ++tp)
        if (arg.slice(manifest.tp, tp, manifest.dp, dp).localShape() !=
            arg.localShape)
          std::abort(); // a local shape the launcher would not fill
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  mrun::Manifest manifest;
  try {
    manifest = mrun::parseManifest(
        std::string(reinterpret_cast<const char *>(data), size));
  } catch (const std::runtime_error &) {
    return 0;
  }
  // A mesh this large is refused at launch (the process count); slicing it
  // here would only spend the fuzzer's time.
  if (manifest.dp * manifest.tp <= 64)
    sliceEveryArg(manifest);
  return 0;
}
