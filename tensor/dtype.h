// Element types. The dtype is a runtime tag; kernels are templates dispatched with the
// AIM_DISPATCH_* macros below. fp16/bf16 kernels accumulate in fp32.
#pragma once
#include <cstdint>
#include <string>

#include "tensor/check.h"
#include "tensor/half.h"

namespace aim {

enum class DType : uint8_t { f32, f16, bf16, f64, i8, u8, i32, i64, boolean };
constexpr int kNumDTypes = 9;
constexpr DType kAllDTypes[] = {DType::f32, DType::f16, DType::bf16, DType::f64,    DType::i8,
                                DType::u8,  DType::i32, DType::i64,  DType::boolean};

inline int64_t dtype_size(DType t) {
  switch (t) {
    case DType::f32:
    case DType::i32:
      return 4;
    case DType::f16:
    case DType::bf16:
      return 2;
    case DType::f64:
    case DType::i64:
      return 8;
    case DType::i8:
    case DType::u8:
    case DType::boolean:
      return 1;
  }
  return 0;
}
inline bool is_floating(DType t) {
  return t == DType::f32 || t == DType::f16 || t == DType::bf16 || t == DType::f64;
}
inline bool is_integral(DType t) { return !is_floating(t) && t != DType::boolean; }

inline const char* dtype_name(DType t) {
  switch (t) {
    case DType::f32:
      return "f32";
    case DType::f16:
      return "f16";
    case DType::bf16:
      return "bf16";
    case DType::f64:
      return "f64";
    case DType::i8:
      return "i8";
    case DType::u8:
      return "u8";
    case DType::i32:
      return "i32";
    case DType::i64:
      return "i64";
    case DType::boolean:
      return "bool";
  }
  return "?";
}
inline std::string to_string(DType t) { return dtype_name(t); }

inline DType parse_dtype(const std::string& s) {
  for (DType t : kAllDTypes)
    if (s == dtype_name(t)) return t;
  if (s == "float32" || s == "float") return DType::f32;
  if (s == "float16" || s == "half") return DType::f16;
  if (s == "bfloat16") return DType::bf16;
  if (s == "float64" || s == "double") return DType::f64;
  if (s == "int32") return DType::i32;
  if (s == "int64") return DType::i64;
  if (s == "int8") return DType::i8;
  if (s == "uint8") return DType::u8;
  AIM_FAIL("unknown dtype '", s, "' (expected one of f32 f16 bf16 f64 i8 u8 i32 i64 bool)");
}

// C++ type of each dtype on the host.
template <DType t>
struct CppType;
template <>
struct CppType<DType::f32> {
  using type = float;
};
template <>
struct CppType<DType::f16> {
  using type = Half;
};
template <>
struct CppType<DType::bf16> {
  using type = BFloat16;
};
template <>
struct CppType<DType::f64> {
  using type = double;
};
template <>
struct CppType<DType::i8> {
  using type = int8_t;
};
template <>
struct CppType<DType::u8> {
  using type = uint8_t;
};
template <>
struct CppType<DType::i32> {
  using type = int32_t;
};
template <>
struct CppType<DType::i64> {
  using type = int64_t;
};
template <>
struct CppType<DType::boolean> {
  using type = bool;
};

template <class T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() {
  return DType::f32;
}
template <>
constexpr DType dtype_of<Half>() {
  return DType::f16;
}
template <>
constexpr DType dtype_of<BFloat16>() {
  return DType::bf16;
}
template <>
constexpr DType dtype_of<double>() {
  return DType::f64;
}
template <>
constexpr DType dtype_of<int8_t>() {
  return DType::i8;
}
template <>
constexpr DType dtype_of<uint8_t>() {
  return DType::u8;
}
template <>
constexpr DType dtype_of<int32_t>() {
  return DType::i32;
}
template <>
constexpr DType dtype_of<int64_t>() {
  return DType::i64;
}
template <>
constexpr DType dtype_of<bool>() {
  return DType::boolean;
}

}  // namespace aim

#define AIM_DTYPE_CASE_(enum_value, T, ...)     \
  case enum_value: {                            \
    using T = ::aim::CppType<enum_value>::type; \
    __VA_ARGS__;                                \
    break;                                      \
  }

#define AIM_FLOAT_CASES_(T, ...)                     \
  AIM_DTYPE_CASE_(::aim::DType::f32, T, __VA_ARGS__) \
  AIM_DTYPE_CASE_(::aim::DType::f64, T, __VA_ARGS__) \
  AIM_DTYPE_CASE_(::aim::DType::f16, T, __VA_ARGS__) \
  AIM_DTYPE_CASE_(::aim::DType::bf16, T, __VA_ARGS__)

// AIM_DISPATCH_FLOAT_TYPES(dtype, T, { body using T }): f32, f64, f16, bf16 (host types).
#define AIM_DISPATCH_FLOAT_TYPES(dtype, T, ...)                                                 \
  do {                                                                                          \
    switch (dtype) {                                                                            \
      AIM_FLOAT_CASES_(T, __VA_ARGS__)                                                          \
      default:                                                                                  \
        AIM_FAIL("dtype ", ::aim::dtype_name(dtype), " not supported here (float types only)"); \
    }                                                                                           \
  } while (0)

// Every dtype.
#define AIM_DISPATCH_ALL_TYPES(dtype, T, ...)                \
  do {                                                       \
    switch (dtype) {                                         \
      AIM_FLOAT_CASES_(T, __VA_ARGS__)                       \
      AIM_DTYPE_CASE_(::aim::DType::i8, T, __VA_ARGS__)      \
      AIM_DTYPE_CASE_(::aim::DType::u8, T, __VA_ARGS__)      \
      AIM_DTYPE_CASE_(::aim::DType::i32, T, __VA_ARGS__)     \
      AIM_DTYPE_CASE_(::aim::DType::i64, T, __VA_ARGS__)     \
      AIM_DTYPE_CASE_(::aim::DType::boolean, T, __VA_ARGS__) \
    }                                                        \
  } while (0)

// Index types for gather/embedding: i32, i64.
#define AIM_DISPATCH_INDEX_TYPES(dtype, T, ...)                                     \
  do {                                                                              \
    switch (dtype) {                                                                \
      AIM_DTYPE_CASE_(::aim::DType::i32, T, __VA_ARGS__)                            \
      AIM_DTYPE_CASE_(::aim::DType::i64, T, __VA_ARGS__)                            \
      default:                                                                      \
        AIM_FAIL("index dtype must be i32 or i64, got ", ::aim::dtype_name(dtype)); \
    }                                                                               \
  } while (0)
