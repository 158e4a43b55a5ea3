#!/usr/bin/env python3
"""One-off conversion of DIEN's pickled vocabularies (uid_voc.pkl, mid_voc.pkl, cat_voc.pkl from
the reference's generate_voc.py, pickled dicts token -> id) to aim's plain-text vocabularies
(uid_voc.txt, ...: line k holds the token with id k; docs/dien-data.md).

The reference's pickles come from Python 2: their str keys are byte strings, read here as latin-1
and written back as latin-1, so every token keeps its exact bytes.

Usage: dien_vocab_from_pkl.py DIR   (reads DIR/*_voc.pkl, writes DIR/*_voc.txt)
"""
import os
import pickle
import sys


def convert(src, dst):
    with open(src, "rb") as f:
        d = pickle.load(f, encoding="latin1")
    if not isinstance(d, dict) or not d:
        sys.exit("%s: expected a non-empty pickled dict token -> id, got %s" % (src, type(d).__name__))
    by_id = {}
    for tok, i in d.items():
        if isinstance(tok, bytes):
            tok = tok.decode("latin1")
        if not isinstance(tok, str) or not isinstance(i, int):
            sys.exit("%s: entry %r -> %r is not str -> int" % (src, tok, i))
        if "\n" in tok or "\r" in tok or not tok:
            sys.exit("%s: token %r cannot be written one per line" % (src, tok))
        if i in by_id:
            sys.exit("%s: id %d is given to both %r and %r" % (src, i, by_id[i], tok))
        by_id[i] = tok
    missing = [i for i in range(len(by_id)) if i not in by_id]
    if missing:
        sys.exit("%s: ids are not 0..%d: %d is missing" % (src, len(by_id) - 1, missing[0]))
    with open(dst, "w", encoding="latin1", newline="\n") as f:
        for i in range(len(by_id)):
            f.write(by_id[i] + "\n")
    print("%s -> %s: %d tokens" % (src, dst, len(by_id)))


if len(sys.argv) != 2:
    sys.exit(__doc__)
for name in ("uid_voc", "mid_voc", "cat_voc"):
    convert(os.path.join(sys.argv[1], name + ".pkl"), os.path.join(sys.argv[1], name + ".txt"))
