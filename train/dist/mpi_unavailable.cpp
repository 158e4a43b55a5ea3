// The mpi factories in a build without MPI: a clear error. CMakeLists.txt compiles this file
// instead of communicator_mpi.cpp when MPI is not found (or AIM_MPI=OFF).
#include "train/dist/mpi_backend.h"

namespace aim::dist {

namespace {
[[noreturn]] void not_built(const char* what) {
  AIM_FAIL("dist: ", what,
           " needs MPI, and aim was built without MPI: install libopenmpi-dev (tools/deps.sh) and "
           "rebuild (cmake -DAIM_MPI=ON, the default); without MPI use the local backend "
           "(--device cpu --ranks N)");
}
}  // namespace

bool mpi_built() { return false; }
std::string mpi_version() { not_built("mpi_version"); }
std::unique_ptr<Communicator> make_mpi_communicator(Options, const LaunchEnv*) {
  not_built("the mpi backend (CPU ranks under mpirun)");
}

}  // namespace aim::dist
