// The Python that imports pycocotools for the COCO comparison tests: $AIM_PYCOCOTOOLS_PYTHON
// (tools/test.sh sets it from tools/pydeps.sh's venv) or /usr/bin/python3; "" when neither does.
#pragma once
#include <cstdlib>
#include <string>

namespace aim::testing {

inline std::string pycocotools_python() {
  for (const char* p :
       {static_cast<const char*>(std::getenv("AIM_PYCOCOTOOLS_PYTHON")), "/usr/bin/python3"})
    if (p && *p &&
        std::system((std::string(p) + " -c 'import pycocotools' >/dev/null 2>&1").c_str()) == 0)
      return p;
  return "";
}

inline constexpr const char* kNoPycocotools =
    "no Python with pycocotools ($AIM_PYCOCOTOOLS_PYTHON unset or without it, and "
    "/usr/bin/python3 lacks it; tools/test.sh makes a venv with tools/pydeps.sh)";

}  // namespace aim::testing
