# -*- Python -*-
import os

import lit.formats
import lit.util
from lit.llvm import llvm_config
from lit.llvm.subst import ToolSubst

config.name = "MEGATRON"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.excludes = ["CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py", "Inputs", "fuzz"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.megatron_obj_root, "test")

config.substitutions.append(("%PATH%", config.environment["PATH"]))
config.substitutions.append(("%python", config.python_executable))

llvm_config.use_default_substitutions()
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)

# mpirun as root (containers, CI) needs these; one OpenMP thread per rank
# keeps several ranks from oversubscribing the cores.
for name, value in [("OMPI_ALLOW_RUN_AS_ROOT", "1"),
                    ("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"),
                    ("OMP_NUM_THREADS", "1")]:
    config.environment[name] = value
config.substitutions.append(("%mpirun", "mpirun --oversubscribe -np"))

# The CPU runtime's bf16 GEMMs run on oneDNN's bf16 matmul, which needs
# AVX-512 (oneDNN's avx512_core); without it megatron-run refuses a bf16
# step unless MRT_GEMM_BF16=widened asks for fp32 GEMMs on widened operands
# (the same rounding points). The bf16 tests check the numbers, so on such
# a CPU they ask for it; "bf16-gemm" marks a CPU where oneDNN runs them.
def cpu_flags():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()

if {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= cpu_flags():
    config.available_features.add("bf16-gemm")
else:
    config.environment["MRT_GEMM_BF16"] = "widened"

# Open MPI 4.1 makes its top session directory ompi.<host>.<uid> on first use
# and removes it at exit once it is empty; with tests in parallel one
# process's removal can land between another's mkdir and stat, which then
# fails with "File exists". Its cleanup deletes the files in that directory
# but descends into no subdirectory, so a top directory made here with one
# in it is never empty and never removed under a starting process.
import socket
ompi_base = os.path.join(config.test_exec_root, "ompi-session")
host = socket.gethostname()
for name in {host, host.split(".")[0]}:
    top = os.path.join(ompi_base, "ompi.%s.%d" % (name, os.getuid()))
    os.makedirs(os.path.join(top, "keep"), exist_ok=True)
config.environment["OMPI_MCA_orte_tmpdir_base"] = ompi_base
config.substitutions.append(
    ("%utils", os.path.join(config.test_source_root, "..", "utils")))
config.substitutions.append(("%megatron_obj_root", config.megatron_obj_root))

tools = ["megatron-opt", "gpt2-mlir", "llama-mlir", "megatron-compile",
         "megatron-run"]
llvm_config.add_tool_substitutions(tools, [config.megatron_tools_dir])
# LLVM 22's binary tools, not whichever llvm-nm a distribution puts first on
# PATH (Debian's default llvm package is older, and not installed here).
llvm_config.add_tool_substitutions(["llvm-nm", "llvm-readelf"],
                                   [config.llvm_tools_dir])

# The ASan + UBSan build (scripts/test-sanitize.sh) runs the same suites; the
# few tests that exercise what only the release build ships say so.
if lit.util.pythonize_bool(config.megatron_sanitize):
    config.available_features.add("sanitize")

# --target=cuda compiles and links wherever the CUDA toolkit was found at
# configure time; nothing here runs it.
if config.megatron_cuda_runtime:
    config.available_features.add("cuda-toolkit")
    config.substitutions.append(("%cuda_runtime", config.megatron_cuda_runtime))
    # The toolkit's stub driver: a machine with a driver but no GPU.
    config.substitutions.append(
        ("%cuda_stub_driver",
         os.path.join(config.megatron_cuda_toolkit, "lib64", "stubs", "libcuda.so")))
