// Internal: the MPI mesh inside each runtime's context, for the entry points
// both runtimes answer from it alone (mesh_queries.cpp).
#ifndef MEGATRON_RT_LIB_CONTEXT_MESH_H
#define MEGATRON_RT_LIB_CONTEXT_MESH_H

#include "mpi_mesh.h"

namespace mrt {

/// Defined by each runtime beside its `struct mrt_context`.
const MpiMesh &meshOf(const mrt_context *ctx);

} // namespace mrt

#endif // MEGATRON_RT_LIB_CONTEXT_MESH_H
