// The Unicode properties BERT's basic tokenizer uses (data/text/wordpiece.h), as sorted tables
// generated from Python's unicodedata by tools/gen_unicode_tables.py (unicode_tables.cpp).
#pragma once
#include <cstddef>
#include <cstdint>

namespace aim::data::unicode {

struct CodeRange {
  uint32_t first, last;  // inclusive
};
struct Mapping {  // a code point and its replacement: `size` code points of a pool from `offset`
  uint32_t cp, offset, size;
};
struct CombiningClass {
  uint32_t cp, ccc;
};

extern const CodeRange kSpaceSeparator[];  // general category Zs
extern const size_t kSpaceSeparator_size;
extern const CodeRange kOther[];  // C*: Cc, Cf, Cs, Co, Cn
extern const size_t kOther_size;
extern const CodeRange kPunctuation[];  // P*
extern const size_t kPunctuation_size;
extern const CodeRange kNonspacingMark[];  // Mn
extern const size_t kNonspacingMark_size;
extern const CodeRange kPythonSpace[];  // str.isspace()
extern const size_t kPythonSpace_size;
extern const CodeRange kPythonWord[];  // re's \w: str.isalnum() or "_"
extern const size_t kPythonWord_size;
// str.lower()'s Final_Sigma context: case-ignorable code points, and cased ones (that are not
// case-ignorable).
extern const CodeRange kCaseIgnorable[];
extern const size_t kCaseIgnorable_size;
extern const CodeRange kCased[];
extern const size_t kCased_size;
extern const uint32_t kDecompositionPool[];
extern const Mapping kDecompositions[];  // canonical, fully expanded; not Hangul syllables
extern const size_t kDecompositions_size;
extern const CombiningClass kCombiningClasses[];  // non-zero classes
extern const size_t kCombiningClasses_size;
extern const uint32_t kLowerPool[];
extern const Mapping kLower[];  // Python's str.lower() where it changes the code point
extern const size_t kLower_size;
extern const char kUnicodeVersion[];

}  // namespace aim::data::unicode
