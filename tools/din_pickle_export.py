#!/usr/bin/env python3
"""Convert the DIN reference's din/dataset.pkl into aim's DIN export directory.

Usage: din_pickle_export.py DATASET_PKL OUT_DIR

dataset.pkl (DeepInterestNetwork din/build_dataset.py, pickled by Python 2) holds four pickles
one after another: train_set (list of (uid, hist, item, label)), test_set (list of
(uid, hist, (pos_item, neg_item))), cate_list (numpy int32 array, item -> category) and
(user_count, item_count, cate_count). It is read with encoding="latin1", which Python 3 needs for
Python-2 pickles of numpy arrays and scalars (numpy must be installed for those).

OUT_DIR receives (format: docs/din-data.md, "DIN export"; reader: data/din_export.h):
  meta.txt       format aim-din-export-1, users, items, cates, train, test (one "key value" a line)
  cate_list.txt  line k (0-based) = category of item k
  train.tsv      uid \\t item \\t label \\t hist (hist: item ids joined by one space, oldest first)
  test.tsv       each test tuple as two lines: (uid, pos, 1, hist) then (uid, neg, 0, hist)
Every id is checked against the counts and every history must be non-empty; a bad record stops
the conversion naming it (e.g. "train_set[12]: ..."). Files are written under temporary names in
OUT_DIR and renamed when complete, meta.txt last, so a directory with meta.txt is complete.
Exit status 0 on success, 1 with a message on stderr otherwise.
"""
import operator
import os
import pickle
import sys

FORMAT = "aim-din-export-1"


class BadInput(Exception):
    pass


def as_int(v, where):
    """An integer id (Python int or numpy integer; bool and float are refused)."""
    if isinstance(v, bool):
        raise BadInput("%s: expected an integer, got bool %r" % (where, v))
    try:
        return operator.index(v)
    except TypeError:
        raise BadInput("%s: expected an integer, got %s %r" % (where, type(v).__name__, v))


def check_id(v, bound, bound_name, where):
    i = as_int(v, where)
    if not 0 <= i < bound:
        raise BadInput("%s: %d out of range (expected 0 <= id < %s = %d)"
                       % (where, i, bound_name, bound))
    return i


def as_tuple(rec, n, fields, where):
    try:
        t = tuple(rec)
    except TypeError:
        raise BadInput("%s: expected a tuple %s, got %s" % (where, fields, type(rec).__name__))
    if len(t) != n:
        raise BadInput("%s: expected a tuple of %d fields %s, got %d" % (where, n, fields, len(t)))
    return t


def hist_text(hist, items, where):
    try:
        ids = [check_id(h, items, "items", "%s history[%d]" % (where, k))
               for k, h in enumerate(hist)]
    except TypeError:
        raise BadInput("%s: history is not a list (got %s)" % (where, type(hist).__name__))
    if not ids:
        raise BadInput("%s: empty history (the reference emits hist = pos[:i] with i >= 1)" % where)
    return " ".join(map(str, ids))


def load(path):
    with open(path, "rb") as f:
        objs = []
        for name in ("train_set", "test_set", "cate_list", "(user_count, item_count, cate_count)"):
            try:
                objs.append(pickle.load(f, encoding="latin1"))
            except EOFError:
                raise BadInput("%s: file ends before %s (expected 4 pickles: train_set, test_set, "
                               "cate_list, counts)" % (path, name))
        if f.read(1):
            raise BadInput("%s: unexpected data after the 4th pickle" % path)
    return objs


def convert(pkl, out_dir):
    train_set, test_set, cate_list, counts = load(pkl)
    counts = as_tuple(counts, 3, "(users, items, cates)", "counts")
    users, items, cates = (as_int(c, "counts[%d]" % k) for k, c in enumerate(counts))
    for name, v in (("user_count", users), ("item_count", items), ("cate_count", cates)):
        if v < 1:
            raise BadInput("counts: %s must be >= 1, got %d" % (name, v))
    if not hasattr(cate_list, "__len__"):
        raise BadInput("cate_list: expected an array or list, got %s" % type(cate_list).__name__)
    if len(cate_list) != items:
        raise BadInput("cate_list: %d entries, expected item_count = %d" % (len(cate_list), items))
    cate_lines = ["%d\n" % check_id(c, cates, "cate_count", "cate_list[%d]" % k)
                  for k, c in enumerate(cate_list)]

    train_lines = []
    for k, rec in enumerate(train_set):
        where = "train_set[%d]" % k
        uid, hist, item, label = as_tuple(rec, 4, "(uid, hist, item, label)", where)
        label = as_int(label, where + " label")
        if label not in (0, 1):
            raise BadInput("%s: label must be 0 or 1, got %d" % (where, label))
        uid = check_id(uid, users, "user_count", where + " uid")
        item = check_id(item, items, "item_count", where + " item")
        train_lines.append("%d\t%d\t%d\t%s\n" % (uid, item, label, hist_text(hist, items, where)))

    test_lines = []
    for k, rec in enumerate(test_set):
        where = "test_set[%d]" % k
        uid, hist, pair = as_tuple(rec, 3, "(uid, hist, (pos, neg))", where)
        pos, neg = as_tuple(pair, 2, "(pos, neg)", where + " items")
        uid = check_id(uid, users, "user_count", where + " uid")
        h = hist_text(hist, items, where)
        pos = check_id(pos, items, "item_count", where + " pos")
        neg = check_id(neg, items, "item_count", where + " neg")
        test_lines.append("%d\t%d\t1\t%s\n" % (uid, pos, h))
        test_lines.append("%d\t%d\t0\t%s\n" % (uid, neg, h))

    meta = ("format %s\nusers %d\nitems %d\ncates %d\ntrain %d\ntest %d\n"
            % (FORMAT, users, items, cates, len(train_lines), len(test_lines)))
    os.makedirs(out_dir, exist_ok=True)
    meta_path = os.path.join(out_dir, "meta.txt")
    if os.path.exists(meta_path):  # an old export: incomplete until the new meta.txt lands
        os.remove(meta_path)
    for name, lines in (("cate_list.txt", cate_lines), ("train.tsv", train_lines),
                        ("test.tsv", test_lines), ("meta.txt", [meta])):
        tmp = os.path.join(out_dir, ".tmp." + name)
        with open(tmp, "w", encoding="ascii", newline="\n") as f:
            f.writelines(lines)
        os.replace(tmp, os.path.join(out_dir, name))
    return users, items, cates, len(train_lines), len(test_lines)


def main(argv):
    if len(argv) != 3:
        sys.stderr.write("usage: din_pickle_export.py DATASET_PKL OUT_DIR\n")
        return 1
    try:
        users, items, cates, n_train, n_test = convert(argv[1], argv[2])
    except BadInput as e:
        sys.stderr.write("din_pickle_export: %s\n" % e)
        return 1
    except ImportError as e:  # numpy arrays/scalars in the pickle need numpy
        sys.stderr.write("din_pickle_export: %s: %s (install numpy)\n" % (argv[1], e))
        return 1
    except (OSError, pickle.UnpicklingError) as e:
        sys.stderr.write("din_pickle_export: %s: %s\n" % (argv[1], e))
        return 1
    print("din_pickle_export: %s -> %s: %d users, %d items, %d categories, %d train, %d test lines"
          % (argv[1], argv[2], users, items, cates, n_train, n_test))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
