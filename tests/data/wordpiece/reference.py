#!/usr/bin/env python3
"""The reference for aim's WordPiece tokenizer (data/text/wordpiece.h): BERT's basic tokenizer and
WordPiece as google-research/bert's tokenization.py specifies them (FullTokenizer), written out
here over Python's unicodedata. Writes expected.tsv from vocab.txt and corpus.txt:
    <line>\t<uncased|cased>\t<basic tokens, space-separated>\t<token ids, space-separated>
`reference.py --check` fails when expected.tsv differs from what this Python computes (a new
Unicode version would show here first). Corpus lines are split on b"\\n" and decoded as UTF-8 with
invalid bytes ignored, as tokenization.py's convert_to_unicode does."""
import os
import sys
import unicodedata

HERE = os.path.dirname(os.path.abspath(__file__))


def is_whitespace(ch):
    return ch in " \t\n\r" or unicodedata.category(ch) == "Zs"


def is_control(ch):
    if ch in "\t\n\r":
        return False
    return unicodedata.category(ch).startswith("C")


def is_punctuation(ch):
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def is_cjk(cp):
    return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF or
            0x2A700 <= cp <= 0x2B73F or 0x2B740 <= cp <= 0x2B81F or 0x2B820 <= cp <= 0x2CEAF or
            0xF900 <= cp <= 0xFAFF or 0x2F800 <= cp <= 0x2FA1F)


def basic_tokenize(text, lower):
    clean = []
    for ch in text:
        cp = ord(ch)
        if cp == 0 or cp == 0xFFFD or is_control(ch):
            continue
        if is_whitespace(ch):
            clean.append(" ")
        elif is_cjk(cp):
            clean.extend([" ", ch, " "])
        else:
            clean.append(ch)
    out = []
    for word in "".join(clean).split():
        if lower:
            word = word.lower()
            word = "".join(c for c in unicodedata.normalize("NFD", word)
                           if unicodedata.category(c) != "Mn")
        piece = []
        for ch in word:
            if is_punctuation(ch):
                if piece:
                    out.append("".join(piece))
                piece = []
                out.append(ch)
            else:
                piece.append(ch)
        if piece:
            out.append("".join(piece))
    return " ".join(out).split()


def wordpiece(word, vocab, unk="[UNK]", max_chars=100):
    if len(word) > max_chars:
        return [unk]
    pieces, start = [], 0
    while start < len(word):
        end, found = len(word), None
        while start < end:
            sub = word[start:end]
            if start > 0:
                sub = "##" + sub
            if sub in vocab:
                found = sub
                break
            end -= 1
        if found is None:
            return [unk]
        pieces.append(found)
        start = end
    return pieces


def load_vocab(path):
    vocab = {}
    with open(path, "rb") as f:
        lines = f.read().decode("utf-8").split("\n")
    if lines and lines[-1] == "":  # readline's end of file, not a token
        lines.pop()
    for i, line in enumerate(lines):
        vocab[line.strip()] = i  # a repeated token keeps its last line
    return vocab


def expected_lines():
    vocab = load_vocab(os.path.join(HERE, "vocab.txt"))
    with open(os.path.join(HERE, "corpus.txt"), "rb") as f:
        raw = f.read().split(b"\n")
    if raw and raw[-1] == b"":
        raw.pop()
    lines = []
    for n, b in enumerate(raw, 1):
        text = b.decode("utf-8", errors="ignore")
        for lower in (True, False):
            words = basic_tokenize(text, lower)
            ids = [vocab[p] for w in words for p in wordpiece(w, vocab)]
            lines.append(f"{n}\t{'uncased' if lower else 'cased'}\t{' '.join(words)}\t"
                         f"{' '.join(map(str, ids))}\n")
    return lines


def main():
    lines = expected_lines()
    path = os.path.join(HERE, "expected.tsv")
    if "--check" in sys.argv:
        with open(path, encoding="utf-8") as f:
            have = f.readlines()
        if have != lines:
            bad = next(i for i in range(max(len(have), len(lines)))
                       if i >= len(have) or i >= len(lines) or have[i] != lines[i])
            sys.exit(f"{path} differs from this Python's tokens (Unicode "
                     f"{unicodedata.unidata_version}) at line {bad + 1}")
        print(f"expected.tsv matches ({len(lines)} lines, Unicode {unicodedata.unidata_version})")
        return
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(lines)


if __name__ == "__main__":
    main()
