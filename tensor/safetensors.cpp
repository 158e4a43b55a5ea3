#include "tensor/safetensors.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tensor/crc32c.h"

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

// The metadata keys of aim's checksums (CRC-32C): one per tensor of its bytes, as a JSON object
// {name: 8 hex digits} in a string (safetensors metadata values are strings), and one of the
// header: every tensor's name, dtype, shape and offsets and every other metadata entry. Readers
// that do not know them (PyTorch's safetensors) ignore them.
const char* const kTensorSums = "aim_crc32c_tensors";
const char* const kHeaderSum = "aim_crc32c_header";

std::string hex32(uint32_t v) {
  char b[9];
  std::snprintf(b, sizeof b, "%08x", v);
  return b;
}

struct HeaderEntry {
  std::string name, dtype;
  Shape shape;
  uint64_t begin, end;
};

// The header's canonical text: tensors by name, then metadata by key (checksum keys excluded).
uint32_t header_checksum(std::vector<HeaderEntry> entries,
                         const std::map<std::string, std::string>& metadata) {
  std::sort(entries.begin(), entries.end(),
            [](const HeaderEntry& a, const HeaderEntry& b) { return a.name < b.name; });
  std::string text;
  for (const HeaderEntry& e : entries) {
    text += e.name + '\0' + e.dtype + '\0';
    for (int64_t d : e.shape) text += std::to_string(d) + ',';
    text += '\0' + std::to_string(e.begin) + '\0' + std::to_string(e.end) + '\n';
  }
  for (const auto& [k, v] : metadata)
    if (k != kTensorSums && k != kHeaderSum) text += k + '\0' + v + '\n';
  return crc32c(text.data(), text.size());
}

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

std::string first_nan_tensor(const SafetensorsFile& f, int64_t* index) {
  for (const auto& [name, t] : f.tensors) {
    if (!is_floating(t.dtype()) || t.numel() == 0) continue;
    const std::vector<double> v = t.to(DType::f64).contiguous().to_vector<double>();
    for (size_t i = 0; i < v.size(); ++i)
      if (std::isnan(v[i])) {
        if (index) *index = int64_t(i);
        return name;
      }
  }
  return "";
}

SafetensorsFile load_safetensors(const std::string& path) {
  // A directory opens as a stream on Linux and reads fail: name it instead.
  std::error_code dir_ec;
  AIM_CHECK(!std::filesystem::is_directory(path, dir_ec), path,
            ": is a directory, expected a .safetensors file");
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
  AIM_CHECK(f.gcount() == 8, path, ": cannot read the 8-byte header length");
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | lenb[i];
  AIM_CHECK(header_len <= file_size - 8 && header_len < (uint64_t(100) << 20), path,
            ": header length ", header_len, " does not fit in a file of ", file_size, " bytes");
  std::string header(header_len, '\0');
  f.read(header.data(), std::streamsize(header_len));
  AIM_CHECK(uint64_t(f.gcount()) == header_len, path, ": cannot read the ", header_len,
            "-byte header");
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
  // aim's checksums, when the file has them (a file written by another tool has none).
  std::map<std::string, std::string> sums;
  const bool has_tensor_sums = r.metadata.count(kTensorSums) != 0,
             has_header_sum = r.metadata.count(kHeaderSum) != 0;
  AIM_CHECK(has_tensor_sums == has_header_sum, path, ": metadata has ",
            has_tensor_sums ? kTensorSums : kHeaderSum, " but not ",
            has_tensor_sums ? kHeaderSum : kTensorSums, ": the header is damaged");
  if (has_header_sum) {
    std::vector<HeaderEntry> he;
    for (const Entry& en : entries)
      he.push_back({en.name, safetensors_dtype(en.t), en.shape, en.begin, en.end});
    const std::string want = r.metadata.at(kHeaderSum),
                      got = hex32(header_checksum(he, r.metadata));
    AIM_CHECK(want == got, path,
              ": the header (tensor names, dtypes, shapes, offsets, metadata) "
              "fails its checksum (stored crc32c ",
              want, ", computed ", got, "): the file is damaged");
    try {
      const nlohmann::json js = nlohmann::json::parse(r.metadata.at(kTensorSums));
      for (auto it = js.begin(); it != js.end(); ++it) sums[it.key()] = it->get<std::string>();
    } catch (const std::exception& e) {
      AIM_FAIL(path, ": metadata ", kTensorSums, " is not a JSON object of strings: ", e.what());
    }
    for (const Entry& en : entries)
      AIM_CHECK(sums.count(en.name), path, ": tensor '", en.name, "' has no checksum in ",
                kTensorSums, ": the header is damaged");
    AIM_CHECK(sums.size() == entries.size(), path, ": ", kTensorSums, " lists ", sums.size(),
              " tensors, the header ", entries.size(), ": the header is damaged");
    r.metadata.erase(kTensorSums);
    r.metadata.erase(kHeaderSum);
    r.checksummed = true;
  }
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return a.begin < b.begin; });
  const uint64_t data_start = 8 + header_len;
  for (const Entry& en : entries) {
    Tensor t = Tensor::empty(en.shape, en.t, kCPU);
    f.seekg(std::streamoff(data_start + en.begin));
    f.read(static_cast<char*>(t.raw_data()), std::streamsize(en.end - en.begin));
    AIM_CHECK(f.good(), path, ": read of tensor '", en.name, "' failed (file truncated?)");
    if (r.checksummed) {
      const std::string want = sums.at(en.name), got = hex32(crc32c(t.raw_data(), t.nbytes()));
      AIM_CHECK(want == got, path, ": tensor '", en.name, "' (", dtype_name(en.t), " ",
                to_string(en.shape), ") fails its checksum (stored crc32c ", want, ", computed ",
                got, "): its bytes are damaged");
    }
    r.tensors.push_back({en.name, t});
  }
  return r;
}

namespace {

// Writes every byte or throws with errno's reason; the caller removes the temporary file.
void write_all(int fd, const void* data, size_t n, const std::string& tmp) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd, p, std::min(n, size_t(1) << 30));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) throw Error(tmp + ": write failed: " + std::strerror(w < 0 ? errno : EIO));
    p += w;
    n -= size_t(w);
  }
}

}  // namespace

void save_safetensors(const std::string& path,
                      const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  AIM_CHECK(!metadata.count(kTensorSums) && !metadata.count(kHeaderSum), path, ": metadata keys ",
            kTensorSums, " and ", kHeaderSum, " are aim's checksums, not the caller's");
  nlohmann::json j = nlohmann::json::object();
  std::map<std::string, std::string> md = metadata;
  std::vector<Tensor> host;
  std::vector<HeaderEntry> he;
  nlohmann::json sums = nlohmann::json::object();
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    AIM_CHECK(!j.contains(name) && name != "__metadata__", path, ": tensor name '", name,
              "' appears twice or is reserved");
    Tensor h = t.to(kCPU).contiguous();
    const uint64_t n = uint64_t(h.nbytes());
    j[name] = {{"dtype", safetensors_dtype(h.dtype())},
               {"shape", h.sizes()},
               {"data_offsets", {offset, offset + n}}};
    he.push_back({name, safetensors_dtype(h.dtype()), h.sizes(), offset, offset + n});
    sums[name] = hex32(crc32c(h.raw_data(), h.nbytes()));
    offset += n;
    host.push_back(h);
  }
  md[kTensorSums] = sums.dump();
  md[kHeaderSum] = hex32(header_checksum(he, md));
  j["__metadata__"] = md;
  std::string header = j.dump();
  while (header.size() % 8) header += ' ';  // align the data section, as the reference writer does
  // A temporary file next to `path`, synced, then renamed over it: a crash, a full disk or a
  // failed write leaves the previous file whole (the temporary one is removed on an error).
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  AIM_CHECK(fd >= 0, tmp, ": cannot open for writing (", std::strerror(errno), ")");
  try {
    unsigned char lenb[8];
    const uint64_t len = header.size();
    for (int i = 0; i < 8; ++i) lenb[i] = static_cast<unsigned char>(len >> (8 * i));
    write_all(fd, lenb, 8, tmp);
    write_all(fd, header.data(), header.size(), tmp);
    for (const Tensor& h : host) write_all(fd, h.raw_data(), h.nbytes(), tmp);
    if (::fsync(fd) != 0) throw Error(tmp + ": fsync failed: " + std::strerror(errno));
  } catch (const Error& e) {
    ::close(fd);
    ::unlink(tmp.c_str());
    AIM_FAIL(e.what(), "; nothing was renamed over ", path,
             " (a previous file there is intact; the temporary file is removed)");
  }
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    AIM_FAIL(tmp, ": close failed: ", std::strerror(err), "; nothing was renamed over ", path);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    AIM_FAIL("cannot rename ", tmp, " to ", path, ": ", std::strerror(err));
  }
  // The rename itself is durable once the directory is synced.
  std::string dir = std::filesystem::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

}  // namespace aim
