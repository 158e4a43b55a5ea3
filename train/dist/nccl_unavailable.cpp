// The NCCL factories in a build without CUDA: a clear error (communicator_nccl.cpp is not
// compiled there; CMakeLists.txt drops *_nccl.cpp when AIM_CUDA is off).
#ifndef AIM_CUDA
#include "train/dist/nccl_backend.h"

namespace aim::dist {

namespace {
[[noreturn]] void not_built(const char* what) {
  AIM_FAIL("dist: ", what,
           " needs NCCL, and this aim was built without CUDA (AIM_CUDA=OFF): use "
           "the local backend (--device cpu --ranks N) or rebuild with the CUDA toolkit");
}
}  // namespace

bool nccl_built() { return false; }
std::string nccl_version() { not_built("nccl_version"); }
std::vector<std::unique_ptr<Communicator>> make_nccl_communicators(const std::vector<int>&,
                                                                   Options) {
  not_built("--gpus N");
}
std::unique_ptr<Communicator> make_nccl_communicator(const LaunchEnv&, Options, int) {
  not_built("a NCCL communicator");
}

}  // namespace aim::dist
#endif
