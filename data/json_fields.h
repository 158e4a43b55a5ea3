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

// An integer, or a float with an integral value (as COCO's writers sometimes store ids).
inline int64_t int_field(const json& j, const char* key, const std::string& where) {
  const json& v = field(j, key, where);
  AIM_CHECK(v.is_number_integer() ||
                (v.is_number_float() && v.get<double>() == std::floor(v.get<double>())),
            where, ".", key, ": expected an integer, got ", v.dump());
  return v.is_number_integer() ? v.get<int64_t>() : int64_t(v.get<double>());
}

inline double num_field(const json& j, const char* key, const std::string& where) {
  const json& v = field(j, key, where);
  AIM_CHECK(v.is_number(), where, ".", key, ": expected a number, got ", v.dump());
  return v.get<double>();
}

}  // namespace aim::data::json_fields
