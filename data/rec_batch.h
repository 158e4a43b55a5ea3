// RecBatch: one batch of click-through-rate samples (DIN/DIEN style) as CPU tensors, and the
// collate step shared by the synthetic generator and the DIEN TSV reader.
//
// Layout (B = batch size, T = longest history in this batch; no global maximum):
//   uid, item, cate, lengths, label : [B] i64
//   hist_item, hist_cate            : [B, T] i64, oldest -> newest, padded with id 0 at the end
//   mask                            : [B, T] f32, 1.0 = real history position, 0.0 = padding
// label is 0/1. lengths[b] = number of real positions of row b (1 <= lengths[b] <= T).
#pragma once
#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tensor/check.h"
#include "tensor/tensor.h"

namespace aim::data {

struct RecBatch {
  Tensor uid, item, cate;       // [B] i64
  Tensor hist_item, hist_cate;  // [B, T] i64
  Tensor mask;                  // [B, T] f32 (1 = real position)
  Tensor lengths;               // [B] i64
  Tensor label;                 // [B] i64 (0/1)

  int64_t batch_size() const { return item.numel(); }
  int64_t max_len() const { return hist_item.dim() == 2 ? hist_item.size(1) : 0; }

  // Copy of every defined tensor on device d (same device returns shared tensors).
  RecBatch to(Device d) const {
    auto mv = [d](const Tensor& t) { return t.defined() ? t.to(d) : t; };
    return RecBatch{mv(uid),       mv(item), mv(cate),    mv(hist_item),
                    mv(hist_cate), mv(mask), mv(lengths), mv(label)};
  }
  // The named-tensor form models and --inputs files use (undefined tensors are left out).
  std::map<std::string, Tensor> to_map() const {
    std::map<std::string, Tensor> m;
    const std::pair<const char*, const Tensor*> all[] = {{"uid", &uid},
                                                         {"item", &item},
                                                         {"cate", &cate},
                                                         {"hist_item", &hist_item},
                                                         {"hist_cate", &hist_cate},
                                                         {"mask", &mask},
                                                         {"lengths", &lengths},
                                                         {"label", &label}};
    for (const auto& [k, t] : all)
      if (t->defined()) m.emplace(k, *t);
    return m;
  }
  // Inverse of to_map(); absent names stay undefined (shapes are checked by the model).
  static RecBatch from_map(const std::map<std::string, Tensor>& m) {
    auto get = [&m](const char* k) {
      auto it = m.find(k);
      return it == m.end() ? Tensor() : it->second;
    };
    return RecBatch{get("uid"),       get("item"), get("cate"),    get("hist_item"),
                    get("hist_cate"), get("mask"), get("lengths"), get("label")};
  }
};

// One sample before batching. hist_item and hist_cate have the same length (>= 1).
struct RecExample {
  int64_t uid = 0, item = 0, cate = 0, label = 0;
  std::vector<int64_t> hist_item, hist_cate;
};

// Pads histories to the longest in `ex` with id 0 and builds the mask (see top of file).
inline RecBatch collate(const std::vector<RecExample>& ex) {
  const int64_t B = int64_t(ex.size());
  AIM_CHECK(B > 0, "collate: empty batch");
  int64_t T = 0;
  for (const RecExample& e : ex) {
    AIM_CHECK(e.hist_item.size() == e.hist_cate.size() && !e.hist_item.empty(),
              "collate: history of items and categories must be non-empty and equally long");
    T = std::max<int64_t>(T, int64_t(e.hist_item.size()));
  }
  std::vector<int64_t> uid(B), item(B), cate(B), len(B), label(B), hi(B * T, 0), hc(B * T, 0);
  std::vector<float> mask(B * T, 0.0f);
  for (int64_t b = 0; b < B; ++b) {
    const RecExample& e = ex[b];
    uid[b] = e.uid;
    item[b] = e.item;
    cate[b] = e.cate;
    label[b] = e.label;
    len[b] = int64_t(e.hist_item.size());
    for (int64_t t = 0; t < len[b]; ++t) {
      hi[b * T + t] = e.hist_item[t];
      hc[b * T + t] = e.hist_cate[t];
      mask[b * T + t] = 1.0f;
    }
  }
  return RecBatch{Tensor::from_vector(uid, {B}),   Tensor::from_vector(item, {B}),
                  Tensor::from_vector(cate, {B}),  Tensor::from_vector(hi, {B, T}),
                  Tensor::from_vector(hc, {B, T}), Tensor::from_vector(mask, {B, T}),
                  Tensor::from_vector(len, {B}),   Tensor::from_vector(label, {B})};
}

}  // namespace aim::data
