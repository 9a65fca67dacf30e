# add_megatron_library(name ...): one component of the compiler (the tp
# dialect, the transforms, a conversion, the targets, the models), taking
# add_mlir_library's arguments.
#
# Components are not installed and not linked one by one: their objects make
# up the one shared library MegatronCompiler (lib/CMakeLists.txt), which the
# tools, the unit tests and embedders link, so link order never matters and
# every registration lives in one copy.
function(add_megatron_library name)
  add_mlir_library(${name} DISABLE_INSTALL OBJECT ${ARGN})
  # Nothing links the static archive add_mlir_library makes beside the
  # objects; it is archived only where a component's LINK_LIBS name another
  # (which orders their generated headers).
  set_target_properties(${name} PROPERTIES EXCLUDE_FROM_ALL ON)
  set_property(GLOBAL APPEND PROPERTY MEGATRON_COMPILER_COMPONENTS ${name})
endfunction()
