//===- StepLibrary.cpp - LLVM IR, entry points, object and .so ------------===//
#include "megatron/Target/StepLibrary.h"
#include "megatron_rt/contract.h"

#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Target/TargetOptions.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/TargetParser/SubtargetFeature.h"
#include "llvm/Support/FileUtilities.h"

#include <dlfcn.h>

using namespace mlir;

namespace {

/// Loads the function's arguments from the shared `void **args` array.
llvm::SmallVector<llvm::Value *> unpackArguments(llvm::IRBuilder<> &b,
                                                 llvm::Function &entry,
                                                 const megatron::StepEntry &step) {
  auto *ptr = llvm::PointerType::getUnqual(b.getContext());
  llvm::SmallVector<llvm::Value *> args = {entry.getArg(0)};
  for (unsigned index : step.argIndices) {
    llvm::Value *slot =
        b.CreateConstInBoundsGEP1_64(ptr, entry.getArg(1), index);
    args.push_back(b.CreateLoad(ptr, slot));
  }
  return args;
}

/// `void mgt_function(ctx, args)` (and mgt_prefill, mgt_decode): the
/// function writes its outputs into their arguments and returns nothing.
LogicalResult addFunctionEntry(llvm::Module &module, llvm::Function &function,
                               const megatron::StepEntry &step, Location loc) {
  if (!function.getReturnType()->isVoidTy())
    return emitError(loc) << "the " << step.kind
                          << " entry must return nothing (every result "
                             "written into its output argument)";
  llvm::LLVMContext &context = module.getContext();
  llvm::IRBuilder<> b(context);
  auto *ptr = llvm::PointerType::getUnqual(context);
  auto *entry = llvm::Function::Create(
      llvm::FunctionType::get(b.getVoidTy(), {ptr, ptr}, false),
      llvm::GlobalValue::ExternalLinkage, MGT_ENTRY_PREFIX + step.kind,
      module);
  b.SetInsertPoint(llvm::BasicBlock::Create(context, "entry", entry));
  b.CreateCall(&function, unpackArguments(b, *entry, step));
  b.CreateRetVoid();
  return success();
}

/// `float mgt_forward(ctx, args)` returns the function's scalar;
/// `void mgt_train_step(ctx, args, float *results)` stores each of its
/// scalars (loss, gradient norm).
LogicalResult addEntry(llvm::Module &module, const megatron::StepEntry &step,
                       Location loc) {
  llvm::Function *function = module.getFunction(step.function);
  if (!function)
    return emitError(loc) << "the lowered module has no function '"
                          << step.function << "'";
  // The context, then one pointer per manifest argument: a result the
  // lowering could not write in place became one more (out-)parameter,
  // which no caller would pass.
  if (function->arg_size() != step.argIndices.size() + 1)
    return emitError(loc) << "the lowered '" << step.function << "' takes "
                          << function->arg_size() - 1
                          << " buffers but the manifest lists "
                          << step.argIndices.size()
                          << " (a result that updates no argument in place?)";
  function->setLinkage(llvm::GlobalValue::InternalLinkage);
  // A framework's function and generation's steps write their outputs
  // into arguments and return nothing.
  if (step.kind == MGT_ENTRY_KIND_FUNCTION ||
      step.kind == MGT_ENTRY_KIND_PREFILL || step.kind == MGT_ENTRY_KIND_DECODE)
    return addFunctionEntry(module, *function, step, loc);
  llvm::LLVMContext &context = module.getContext();
  llvm::IRBuilder<> b(context);
  auto *ptr = llvm::PointerType::getUnqual(context);
  bool returnsLoss = step.kind == MGT_ENTRY_KIND_FORWARD;
  if (returnsLoss && !function->getReturnType()->isFloatTy())
    return emitError(loc) << "the forward entry must return the f32 loss";
  auto *type = returnsLoss
                   ? llvm::FunctionType::get(b.getFloatTy(), {ptr, ptr}, false)
                   : llvm::FunctionType::get(b.getVoidTy(), {ptr, ptr, ptr},
                                             false);
  auto *entry = llvm::Function::Create(
      type, llvm::GlobalValue::ExternalLinkage, MGT_ENTRY_PREFIX + step.kind,
      module);
  b.SetInsertPoint(llvm::BasicBlock::Create(context, "entry", entry));
  llvm::Value *result = b.CreateCall(function, unpackArguments(b, *entry, step));
  if (returnsLoss) {
    b.CreateRet(result);
    return success();
  }
  // The runtime passes MGT_TRAIN_RESULT_COUNT floats: the loss and the
  // gradient norm, in the contract's order, and nothing else.
  auto *results = llvm::dyn_cast<llvm::StructType>(result->getType());
  if (!results || results->getNumElements() != MGT_TRAIN_RESULT_COUNT ||
      !llvm::all_of(results->elements(),
                    [](llvm::Type *type) { return type->isFloatTy(); }))
    return emitError(loc) << "the train step must return exactly its f32 loss "
                             "and gradient norm (every update written in place)";
  for (unsigned slot : {MGT_TRAIN_RESULT_LOSS, MGT_TRAIN_RESULT_GRAD_NORM})
    b.CreateStore(b.CreateExtractValue(result, slot),
                  b.CreateConstInBoundsGEP1_64(b.getFloatTy(),
                                               entry->getArg(2), slot));
  b.CreateRetVoid();
  return success();
}

/// `const char *mgt_manifest(void)`.
void addManifestEntry(llvm::Module &module, StringRef manifest) {
  llvm::LLVMContext &context = module.getContext();
  llvm::IRBuilder<> b(context);
  auto *type = llvm::FunctionType::get(llvm::PointerType::getUnqual(context),
                                       /*isVarArg=*/false);
  auto *entry = llvm::Function::Create(
      type, llvm::GlobalValue::ExternalLinkage, MGT_ENTRY_MANIFEST, module);
  b.SetInsertPoint(llvm::BasicBlock::Create(context, "entry", entry));
  b.CreateRet(b.CreateGlobalString(manifest, "mgt.manifest", 0, &module));
}

std::unique_ptr<llvm::TargetMachine> hostTargetMachine(std::string &error) {
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  llvm::Triple triple(llvm::sys::getDefaultTargetTriple());
  const llvm::Target *target = llvm::TargetRegistry::lookupTarget(triple, error);
  if (!target)
    return nullptr;
  llvm::SubtargetFeatures features;
  for (const auto &feature : llvm::sys::getHostCPUFeatures())
    features.AddFeature(feature.first(), feature.second);
  return std::unique_ptr<llvm::TargetMachine>(target->createTargetMachine(
      triple, llvm::sys::getHostCPUName(), features.getString(),
      llvm::TargetOptions(), llvm::Reloc::PIC_));
}

LogicalResult writeObject(llvm::Module &module, llvm::TargetMachine &machine,
                          StringRef path, Location loc) {
  std::error_code error;
  llvm::ToolOutputFile out(path, error, llvm::sys::fs::OF_None);
  if (error)
    return emitError(loc) << "cannot write '" << path
                          << "': " << error.message();
  llvm::legacy::PassManager pm;
  if (machine.addPassesToEmitFile(pm, out.os(), nullptr,
                                  llvm::CodeGenFileType::ObjectFile))
    return emitError(loc) << "the host target cannot emit objects";
  pm.run(module);
  out.keep();
  return success();
}

/// The directory of the object this code was linked into:
/// libMegatronCompiler.so, in the build tree's or the install's lib/, where
/// the runtimes are built and installed beside it.
FailureOr<std::string> compilerLibraryDirectory(Location loc) {
  Dl_info info;
  if (!dladdr(reinterpret_cast<void *>(&compilerLibraryDirectory), &info) ||
      !info.dli_fname)
    return emitError(loc) << "cannot locate megatron-mlir's compiler library";
  llvm::SmallString<256> path;
  if (std::error_code error = llvm::sys::fs::real_path(info.dli_fname, path))
    return emitError(loc) << "cannot locate '" << info.dli_fname
                          << "': " << error.message();
  return llvm::sys::path::parent_path(path).str();
}

/// The runtime that generated code of `target` calls: its name for -l and
/// its directory.
FailureOr<std::pair<StringRef, std::string>>
runtimeLibrary(megatron::Target target, Location loc) {
  StringRef name =
      target == megatron::Target::CUDA ? "megatron_rt_cuda" : "megatron_rt";
  FailureOr<std::string> directory = compilerLibraryDirectory(loc);
  if (failed(directory))
    return failure();
  llvm::SmallString<256> file(*directory);
  llvm::sys::path::append(file, "lib" + name + ".so");
  if (!llvm::sys::fs::exists(file))
    return emitError(loc) << "the runtime '" << file << "' is missing"
                          << (target == megatron::Target::CUDA
                                  ? " (megatron-mlir was built without a CUDA "
                                    "toolkit)"
                                  : "");
  return std::make_pair(name, *directory);
}

/// The DT_RPATH for a step written to `output`: the runtime's directory relative
/// to the step, so that a tree holding both can move. A step moved alone is
/// still loaded by megatron-run, whose own DT_RPATH (the runtime beside it)
/// the dynamic loader searches after the step's: hence DT_RPATH, which a
/// DT_RUNPATH would switch off.
std::string relativeRuntimePath(StringRef output, StringRef runtimeDirectory) {
  llvm::SmallString<256> outputDirectory(output);
  llvm::sys::fs::make_absolute(outputDirectory);
  llvm::sys::path::remove_filename(outputDirectory);
  // The step's directory as the loader will see it, links resolved like
  // the runtime's; it exists, or the link fails and says so.
  llvm::SmallString<256> resolved;
  if (!llvm::sys::fs::real_path(outputDirectory, resolved))
    outputDirectory = resolved;
  llvm::SmallString<256> relative;
  auto from = llvm::sys::path::begin(outputDirectory),
       fromEnd = llvm::sys::path::end(outputDirectory);
  auto to = llvm::sys::path::begin(runtimeDirectory),
       toEnd = llvm::sys::path::end(runtimeDirectory);
  while (from != fromEnd && to != toEnd && *from == *to)
    ++from, ++to;
  for (; from != fromEnd; ++from)
    llvm::sys::path::append(relative, "..");
  for (; to != toEnd; ++to)
    llvm::sys::path::append(relative, *to);
  return ("$ORIGIN/" + relative).str();
}

/// Links the object into a shared object that needs the target's runtime.
LogicalResult linkSharedObject(StringRef object, StringRef output,
                               megatron::Target target, Location loc) {
  FailureOr<std::pair<StringRef, std::string>> runtime =
      runtimeLibrary(target, loc);
  if (failed(runtime))
    return failure();
  llvm::ErrorOr<std::string> linker = llvm::sys::findProgramByName("cc");
  if (!linker)
    return emitError(loc) << "no C compiler driver 'cc' on PATH to link '"
                          << output << "'";
  std::string rpath = relativeRuntimePath(output, runtime->second);
  std::string searchPath = "-L" + runtime->second;
  std::string library = ("-l" + runtime->first).str();
  // -Xlinker passes each word whole: a path may hold the commas -Wl, splits.
  // --no-as-needed: megatron-run finds the runtime through the library
  // (mrt_context_create), also where the generated code calls none of it.
  llvm::SmallVector<StringRef> args = {
      *linker,    "-shared",   "-o",       output,
      object,     searchPath,  "-Xlinker", "--no-as-needed",
      library,    "-Xlinker",  "--as-needed",
      "-Xlinker", "--disable-new-dtags",   "-Xlinker",
      "-rpath",   "-Xlinker",  rpath,      "-lm"};
  std::string message;
  if (llvm::sys::ExecuteAndWait(*linker, args, std::nullopt, {}, 0, 0,
                                &message) != 0)
    return emitError(loc) << "linking '" << output << "' failed"
                          << (message.empty() ? "" : ": ") << message;
  return success();
}

} // namespace

LogicalResult megatron::emitStepLibrary(ModuleOp lowered, StringRef outputPath,
                                        StepOutput output) {
  Location loc = lowered.getLoc();
  FailureOr<StepRecord> step = readStepRecord(lowered);
  if (failed(step))
    return failure();
  // The CUDA step's gpu.binary becomes a global and the module load/unload
  // constructors around it.
  DialectRegistry translations;
  registerAllToLLVMIRTranslations(translations);
  lowered.getContext()->appendDialectRegistry(translations);
  llvm::LLVMContext context;
  std::unique_ptr<llvm::Module> module =
      translateModuleToLLVMIR(lowered, context, "megatron-step");
  if (!module)
    return emitError(loc) << "cannot translate the step to LLVM IR";
  for (const StepEntry &entry : step->entries)
    if (failed(addEntry(*module, entry, loc)))
      return failure();
  addManifestEntry(*module, step->manifest);

  std::string error;
  std::unique_ptr<llvm::TargetMachine> machine = hostTargetMachine(error);
  if (!machine)
    return emitError(loc) << "no host target: " << error;
  // Each function is compiled on its own: a layer body called from one
  // loop, inlined into the step, would make LLVM optimise and allocate
  // registers for the step and its layers as one function.
  for (llvm::Function &function : *module)
    if (!function.isDeclaration())
      function.addFnAttr(llvm::Attribute::NoInline);
  module->setDataLayout(machine->createDataLayout());
  module->setTargetTriple(machine->getTargetTriple());
  if (llvm::Error failure =
          makeOptimizingTransformer(3, 0, machine.get())(module.get()))
    return emitError(loc) << "LLVM optimisation failed: "
                          << llvm::toString(std::move(failure));

  if (output == StepOutput::Object)
    return writeObject(*module, *machine, outputPath, loc);
  llvm::SmallString<128> object;
  if (llvm::sys::fs::createTemporaryFile("megatron-step", "o", object))
    return emitError(loc) << "cannot create a temporary object file";
  llvm::FileRemover removeObject(object);
  if (failed(writeObject(*module, *machine, object, loc)))
    return failure();
  return linkSharedObject(object, outputPath, step->target, loc);
}
