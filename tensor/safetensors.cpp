#include "tensor/safetensors.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

namespace aim {

const char* safetensors_dtype(DType t) {
  switch (t) {
    case DType::f32:
      return "F32";
    case DType::f16:
      return "F16";
    case DType::bf16:
      return "BF16";
    case DType::f64:
      return "F64";
    case DType::i8:
      return "I8";
    case DType::u8:
      return "U8";
    case DType::i32:
      return "I32";
    case DType::i64:
      return "I64";
    case DType::boolean:
      return "BOOL";
  }
  return "?";
}

namespace {
bool parse_st_dtype(const std::string& s, DType* t) {
  for (DType d : kAllDTypes)
    if (s == safetensors_dtype(d)) {
      *t = d;
      return true;
    }
  return false;
}
}  // namespace

const Tensor& SafetensorsFile::at(const std::string& name) const {
  for (const auto& [n, t] : tensors)
    if (n == name) return t;
  std::string names;
  for (const auto& [n, t] : tensors) names += (names.empty() ? "" : ", ") + n;
  AIM_FAIL(path, ": no tensor '", name, "' (has: ", names, ")");
}

bool SafetensorsFile::has(const std::string& name) const {
  for (const auto& [n, t] : tensors)
    if (n == name) return true;
  return false;
}

SafetensorsFile load_safetensors(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  AIM_CHECK(f.good(), path, ": cannot open (", std::strerror(errno), ")");
  f.seekg(0, std::ios::end);
  const uint64_t file_size = uint64_t(f.tellg());
  f.seekg(0);
  AIM_CHECK(file_size >= 8, path, ": not a safetensors file (", file_size,
            " bytes, shorter than the 8-byte header length)");
  uint64_t header_len = 0;
  unsigned char lenb[8];
  f.read(reinterpret_cast<char*>(lenb), 8);
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | lenb[i];
  AIM_CHECK(header_len <= file_size - 8 && header_len < (uint64_t(100) << 20), path,
            ": header length ", header_len, " does not fit in a file of ", file_size, " bytes");
  std::string header(header_len, '\0');
  f.read(header.data(), std::streamsize(header_len));
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(header);
  } catch (const std::exception& e) {
    AIM_FAIL(path, ": header is not valid JSON: ", e.what());
  }
  AIM_CHECK(j.is_object(), path, ": header is not a JSON object");
  const uint64_t data_size = file_size - 8 - header_len;
  SafetensorsFile r;
  r.path = path;
  struct Entry {
    std::string name;
    DType t;
    Shape shape;
    uint64_t begin, end;
  };
  std::vector<Entry> entries;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() == "__metadata__") {
      AIM_CHECK(it->is_object(), path, ": __metadata__ is not an object");
      for (auto m = it->begin(); m != it->end(); ++m) {
        AIM_CHECK(m->is_string(), path, ": metadata '", m.key(), "' is not a string");
        r.metadata[m.key()] = m->get<std::string>();
      }
      continue;
    }
    const auto& e = *it;
    const std::string& name = it.key();
    AIM_CHECK(
        e.is_object() && e.contains("dtype") && e.contains("shape") && e.contains("data_offsets"),
        path, ": tensor '", name, "' needs dtype, shape and data_offsets");
    Entry en{name, DType::f32, {}, 0, 0};
    AIM_CHECK(e["dtype"].is_string() && parse_st_dtype(e["dtype"].get<std::string>(), &en.t), path,
              ": tensor '", name, "' has unsupported dtype ", e["dtype"].dump());
    AIM_CHECK(e["shape"].is_array(), path, ": tensor '", name, "' shape is not an array");
    for (const auto& d : e["shape"]) {
      AIM_CHECK(d.is_number_unsigned(), path, ": tensor '", name, "' has a bad dimension ",
                d.dump());
      en.shape.push_back(d.get<int64_t>());
    }
    const auto& off = e["data_offsets"];
    AIM_CHECK(off.is_array() && off.size() == 2 && off[0].is_number_unsigned() &&
                  off[1].is_number_unsigned(),
              path, ": tensor '", name, "' data_offsets must be [begin, end]");
    en.begin = off[0].get<uint64_t>();
    en.end = off[1].get<uint64_t>();
    const uint64_t need = uint64_t(shape_numel(en.shape) * dtype_size(en.t));
    AIM_CHECK(en.begin <= en.end && en.end <= data_size, path, ": tensor '", name,
              "' data_offsets [", en.begin, ", ", en.end, "] outside the data section of ",
              data_size, " bytes (file truncated?)");
    AIM_CHECK(en.end - en.begin == need, path, ": tensor '", name, "' has ", en.end - en.begin,
              " bytes, but ", dtype_name(en.t), " ", to_string(en.shape), " needs ", need);
    entries.push_back(en);
  }
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return a.begin < b.begin; });
  const uint64_t data_start = 8 + header_len;
  for (const Entry& en : entries) {
    Tensor t = Tensor::empty(en.shape, en.t, kCPU);
    f.seekg(std::streamoff(data_start + en.begin));
    f.read(static_cast<char*>(t.raw_data()), std::streamsize(en.end - en.begin));
    AIM_CHECK(f.good(), path, ": read of tensor '", en.name, "' failed (file truncated?)");
    r.tensors.push_back({en.name, t});
  }
  return r;
}

void save_safetensors(const std::string& path,
                      const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  nlohmann::json j = nlohmann::json::object();
  if (!metadata.empty()) j["__metadata__"] = metadata;
  std::vector<Tensor> host;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    AIM_CHECK(!j.contains(name), path, ": tensor name '", name, "' appears twice");
    Tensor h = t.to(kCPU).contiguous();
    const uint64_t n = uint64_t(h.nbytes());
    j[name] = {{"dtype", safetensors_dtype(h.dtype())},
               {"shape", h.sizes()},
               {"data_offsets", {offset, offset + n}}};
    offset += n;
    host.push_back(h);
  }
  std::string header = j.dump();
  while (header.size() % 8) header += ' ';  // align the data section, as the reference writer does
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    AIM_CHECK(f.good(), tmp, ": cannot open for writing (", std::strerror(errno), ")");
    unsigned char lenb[8];
    uint64_t len = header.size();
    for (int i = 0; i < 8; ++i) lenb[i] = static_cast<unsigned char>(len >> (8 * i));
    f.write(reinterpret_cast<const char*>(lenb), 8);
    f.write(header.data(), std::streamsize(header.size()));
    for (const Tensor& h : host)
      f.write(static_cast<const char*>(h.raw_data()), std::streamsize(h.nbytes()));
    f.flush();
    AIM_CHECK(f.good(), tmp, ": write failed (disk full?)");
  }
  AIM_CHECK(std::rename(tmp.c_str(), path.c_str()) == 0, "cannot rename ", tmp, " to ", path, ": ",
            std::strerror(errno));
}

}  // namespace aim
