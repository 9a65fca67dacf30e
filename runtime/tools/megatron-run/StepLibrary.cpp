#include "StepLibrary.h"

#include <cstring>
#include <exception>
#include <fstream>

#include <dlfcn.h>
#include <elf.h>

namespace mrun {
namespace {

template <typename Fn> Fn entry(void *lib, const char *name) {
  return reinterpret_cast<Fn>(dlsym(lib, name));
}

// dlopen maps a truncated library's segments past the end of the file, and
// the process dies of SIGBUS where it first touches them: the ELF headers
// are checked against the file's size first. "" when they fit (or the file
// is no 64-bit ELF file, which dlopen reports itself).
std::string elfBeyondFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in)
    return "";
  const uint64_t size = static_cast<uint64_t>(in.tellg());
  Elf64_Ehdr header;
  in.seekg(0);
  if (!in.read(reinterpret_cast<char *>(&header), sizeof header) ||
      std::memcmp(header.e_ident, ELFMAG, SELFMAG) != 0 ||
      header.e_ident[EI_CLASS] != ELFCLASS64)
    return "";
  auto beyond = [&](uint64_t offset, uint64_t bytes) {
    return offset > size || bytes > size - offset;
  };
  const std::string truncated =
      " is truncated or corrupt (the file has " + std::to_string(size) +
      " bytes): ";
  if (beyond(header.e_phoff, uint64_t(header.e_phnum) * header.e_phentsize) ||
      beyond(header.e_shoff, uint64_t(header.e_shnum) * header.e_shentsize))
    return truncated + "its ELF header tables lie past its end";
  for (unsigned i = 0; i < header.e_phnum; ++i) {
    Elf64_Phdr segment;
    in.seekg(static_cast<std::streamoff>(header.e_phoff +
                                         uint64_t(i) * header.e_phentsize));
    if (!in.read(reinterpret_cast<char *>(&segment), sizeof segment))
      return truncated + "its program headers cannot be read";
    if (segment.p_type == PT_LOAD &&
        beyond(segment.p_offset, segment.p_filesz))
      return truncated + "segment " + std::to_string(i) + " ends at byte " +
             std::to_string(segment.p_offset + segment.p_filesz);
  }
  return "";
}

bool hasDeviceArgs(const Manifest &m) {
  for (const Arg &a : m.args)
    if (a.onDevice)
      return true;
  return false;
}

} // namespace

std::string openStepLibrary(const Options &opt, RuntimeApi &rt,
                            StepLibrary &step) {
  const std::string &name = opt.stepLibrary;
  // A bare name: dlopen would search the library path, not the directory.
  const std::string path =
      name.find('/') == std::string::npos ? "./" + name : name;
  if (const std::string why = elfBeyondFile(path); !why.empty())
    return name + why;
  void *lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib)
    return loadFailure(name, dlerror());
  auto manifest = entry<mgt_manifest_fn>(lib, MGT_ENTRY_MANIFEST);
  if (!manifest)
    return name + " does not export " MGT_ENTRY_MANIFEST
                  " (not a step library compiled by megatron-mlir?)";
  step.forward = entry<mgt_forward_fn>(lib, MGT_ENTRY_FORWARD);
  step.trainStep = entry<mgt_train_step_fn>(lib, MGT_ENTRY_TRAIN_STEP);
  step.function = entry<mgt_function_fn>(lib, MGT_ENTRY_FUNCTION);
  step.prefill = entry<mgt_function_fn>(lib, MGT_ENTRY_PREFILL);
  step.decode = entry<mgt_function_fn>(lib, MGT_ENTRY_DECODE);
  const std::string missing = loadRuntimeApi(lib, rt);
  if (!missing.empty())
    return name + " is not linked against a megatron runtime (no " + missing +
           ")";
  try {
    const char *text = manifest();
    step.manifest = parseManifest(text ? text : "");
  } catch (const std::exception &e) {
    return name + ": " + e.what();
  }
  // The manifest's first entries are what the library must export.
  const Manifest &m = step.manifest;
  const bool isFunction = m.hasEntry(MGT_ENTRY_KIND_FUNCTION);
  const char *missingEntry =
      isFunction        ? (step.function ? nullptr : MGT_ENTRY_FUNCTION)
      : m.generates()   ? (!step.prefill  ? MGT_ENTRY_PREFILL
                           : !step.decode ? MGT_ENTRY_DECODE
                                          : nullptr)
      : !step.forward   ? MGT_ENTRY_FORWARD
                        : nullptr;
  if (missingEntry)
    return name + " does not export " + missingEntry +
           ", which its manifest lists";
  // Refused before any weight is read: the step's first GEMM would end the
  // run with the same words.
  if (rt.gemmError)
    if (const char *why = rt.gemmError(m.computesInBf16()))
      return name + (m.computesInBf16() ? " computes in bf16, but " : ": ") +
             why;
  return capabilityError(opt, step, rt.hasDeviceMemory());
}

std::string loadFailure(const std::string &library,
                        const std::string &dlError) {
  // A CUDA step's runtime needs the NVIDIA driver, absent without a GPU; a
  // driver that is there but too old fails otherwise, with dlerror's own
  // words.
  if (dlError.find("libcuda.so") != std::string::npos &&
      dlError.find("cannot open shared object file") != std::string::npos)
    return library +
           " was compiled for CUDA (--target=cuda) and needs the "
           "NVIDIA driver (libcuda.so.1), which this machine does "
           "not have: it has no usable GPU (" +
           dlError + ")";
  return "cannot load " + library + ": " + dlError;
}

std::string capabilityError(const Options &opt, const StepLibrary &step,
                            bool runtimeHasDeviceMemory) {
  const Manifest &m = step.manifest;
  const std::string &name = opt.stepLibrary;
  const bool isFunction = m.hasEntry(MGT_ENTRY_KIND_FUNCTION);
  if (isFunction != opt.runsFunction())
    return isFunction ? name + " is a function's library (megatron-compile "
                               "--entry " + m.model +
                            "); run it with --entry " + m.model +
                            " --inputs IN --outputs OUT"
                      : "--entry: " + name +
                            " is a model's step library, not a function's";
  if (m.generates() != opt.generate)
    return m.generates()
               ? name + " is a generation step (megatron-compile "
                        "--generate); run it with --generate and a prompt"
               : "--generate: " + name +
                     " was compiled without --generate (megatron-compile "
                     "--generate builds the prefill and decode steps)";
  if (isFunction) {
    if (opt.entry != m.model)
      return "--entry " + opt.entry + ": " + name + " exports the function " +
             m.model;
  } else if (!opt.evalOnly && !opt.generate) {
    if (!step.trainStep)
      return name + " was compiled without --train: compile it with "
                    "megatron-compile --train to train, or pass --eval-only "
                    "to evaluate it";
    if (!m.hasEntry(MGT_ENTRY_KIND_TRAIN_STEP))
      return name + " exports " MGT_ENTRY_TRAIN_STEP ", but its manifest does "
                    "not list the entry \"" MGT_ENTRY_KIND_TRAIN_STEP "\"";
    if (!opt.dumpGrads.empty() && !m.hasGrads())
      return "--dump-grads: " + name +
             " has no gradient outputs; compile with --export-grads";
  }
  if (!opt.dumpLogits.empty() && m.logits < 0)
    return "--dump-logits: " + name +
           " has no logits output; compile with --export-logits";
  if (hasDeviceArgs(m) && !runtimeHasDeviceMemory)
    return name + " keeps arguments in device memory, but its runtime has no "
                  "mrt_device_alloc";
  return "";
}

} // namespace mrun
