// Typed fields of the COCO-style JSON readers (data/coco.cpp, data/coco_keypoints.cpp): each a
// clear error naming the element (`where`) and the field when it is missing or of the wrong type.
#pragma once
#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "tensor/check.h"

namespace aim::data::json_fields {

using json = nlohmann::json;

inline const json& field(const json& j, const char* key, const std::string& where) {
  AIM_CHECK(j.is_object() && j.contains(key), where, ": missing field '", key, "'");
  return j.at(key);
}

// An integer, or a float with an integral value (as COCO's writers sometimes store ids), within
// int64's range (a float beyond it was undefined behaviour in the conversion: found by
// fuzz_coco_instances).
inline int64_t int_field(const json& j, const char* key, const std::string& where) {
  const json& v = field(j, key, where);
  if (v.is_number_unsigned()) {
    AIM_CHECK(v.get<uint64_t>() <= uint64_t(INT64_MAX), where, ".", key, ": ", v.dump(),
              " is beyond the int64 range");
    return int64_t(v.get<uint64_t>());
  }
  if (v.is_number_integer()) return v.get<int64_t>();
  const double d = v.is_number_float() ? v.get<double>() : 0.5;
  AIM_CHECK(v.is_number_float() && d == std::floor(d), where, ".", key,
            ": expected an integer, got ", v.dump());
  AIM_CHECK(d >= -9.2e18 && d <= 9.2e18, where, ".", key, ": ", v.dump(),
            " is beyond the int64 range");
  return int64_t(d);
}

inline double num_field(const json& j, const char* key, const std::string& where) {
  const json& v = field(j, key, where);
  AIM_CHECK(v.is_number(), where, ".", key, ": expected a number, got ", v.dump());
  return v.get<double>();
}

}  // namespace aim::data::json_fields
