// Unicode as Python's str sees it, for the text readers that must give a Python reference's exact
// results (BERT's tokenizer, SQuAD's answer normalisation): UTF-8 decoding with invalid bytes
// dropped (bytes.decode("utf-8", errors="ignore")), NFD, str.lower(), str.isspace(), re's \w.
// Properties come from tables generated from Python's unicodedata (unicode_tables.h).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/text/unicode_tables.h"

namespace aim::data::text {

std::vector<uint32_t> decode_utf8(const std::string& s);
std::string encode_utf8(const std::vector<uint32_t>& cps);
// unicodedata.normalize("NFD", s).
std::vector<uint32_t> nfd(const std::vector<uint32_t>& cps);
// str.lower() (with its Final_Sigma rule: a capital sigma ending a word lowers to U+03C2).
std::vector<uint32_t> python_lower(const std::vector<uint32_t>& s);
std::string python_lower(const std::string& utf8);
bool is_python_space(uint32_t cp);  // str.isspace()
bool is_python_word(uint32_t cp);   // re's \w: str.isalnum() or "_"
bool in_ranges(uint32_t cp, const unicode::CodeRange* r, size_t n);
uint32_t combining_class(uint32_t cp);  // 0 for starters

}  // namespace aim::data::text
