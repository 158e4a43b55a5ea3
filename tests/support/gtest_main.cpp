#include <gtest/gtest.h>

#include "kernels/math_mode.h"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  // The tests compare fp32 results with fp32 tolerances: no TF32 in vendor calls (the library's
  // default, PyTorch's, lets cuDNN convolutions use it; kernels/math_mode.h).
  aim::kernels::set_tf32(aim::kernels::Tf32{false, false});
  return RUN_ALL_TESTS();
}
