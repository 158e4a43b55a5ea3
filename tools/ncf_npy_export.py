#!/usr/bin/env python3
"""Convert the NCF reference's Data/train_data.npy and Data/test_data.npy into aim's NCF files.

Usage: ncf_npy_export.py [--users 6040] [--items 3706] TRAIN_NPY TEST_NPY OUT_DIR

Each .npy (AI Matrix NCF/NCF_input.py dump_data) is np.save of a pickled Python dict
{'user': list, 'item': list, 'label': list} (a 0-d object array; np.load(...).item()). Train: each
positive (label 1) followed by its 4 sampled negatives (label 0). Test: per user 100 consecutive
rows, the held-out positive first and 99 sampled negatives, with the *item id* as the label
(main.py takes label[0] of each 100-row batch as the ground-truth item). The reference hard-codes
6040 users and 3706 items (NCF_input.load_data); --users/--items override the bounds.

OUT_DIR receives train.bin and test.bin (format "AIMNCF01", docs/ncf-data.md; reader
data/ncf_data.h): a 24-byte header (magic AIMNCF01, int32 split 0/1, users, items, rows) and rows of
three little-endian int32 (user, item, label). Test labels are written as 1 for the first row of
each group and 0 for the others.

Checked before anything is written (the first problem stops the conversion, exit status 1, with
"FILE: row R: ..." on stderr): the dict and its keys, equal lengths, integer values, ids within
the bounds, train labels 0/1; test rows a multiple of 100, one user per group, label == item on
every row, and the group's positive item not repeated among its negatives (so ranking by row, as
aim does, equals the reference's hit test by item id). Files are written under temporary names and
renamed when complete.
"""
import argparse
import os
import struct
import sys

import numpy as np

MAGIC = b"AIMNCF01"
GROUP = 100  # 1 held-out positive + 99 negatives (reference test_neg = 99)
INT32_MAX = 2 ** 31 - 1


class BadInput(Exception):
    pass


def load_dict(path):
    try:
        arr = np.load(path, allow_pickle=True, encoding="latin1")
    except Exception as e:  # OSError, ValueError, pickle errors: all mean "not the expected file"
        raise BadInput("%s: cannot load as .npy (%s: %s)" % (path, type(e).__name__, e))
    if not (isinstance(arr, np.ndarray) and arr.dtype == object and arr.shape == ()):
        raise BadInput("%s: expected np.save of a dict (a 0-d object array), got an array of dtype "
                       "%s and shape %s" % (path, getattr(arr, "dtype", "?"), getattr(arr, "shape", "?")))
    d = arr.item()
    if not isinstance(d, dict):
        raise BadInput("%s: the pickled object is a %s, expected a dict with keys user, item, label"
                       % (path, type(d).__name__))
    missing = [k for k in ("user", "item", "label") if k not in d]
    if missing:
        raise BadInput("%s: missing key(s) %s (has: %s)" % (path, ", ".join(missing), ", ".join(map(str, d))))
    cols = {}
    for k in ("user", "item", "label"):
        try:
            a = np.asarray(d[k])
        except (TypeError, ValueError) as e:
            raise BadInput("%s: '%s' is not a list of integers (%s)" % (path, k, e))
        if a.ndim != 1 or a.dtype.kind not in "iu":
            raise BadInput("%s: '%s' must be a flat list of integers, got dtype %s shape %s"
                           % (path, k, a.dtype, a.shape))
        cols[k] = a.astype(np.int64)
    n = len(cols["user"])
    if len(cols["item"]) != n or len(cols["label"]) != n:
        raise BadInput("%s: user, item and label have %d, %d and %d entries (must be equal)"
                       % (path, n, len(cols["item"]), len(cols["label"])))
    if n == 0:
        raise BadInput("%s: no rows" % path)
    if n > INT32_MAX:
        raise BadInput("%s: %d rows do not fit the int32 row count" % (path, n))
    return cols


def first(mask):
    return int(np.flatnonzero(mask)[0])


def check_ids(path, cols, users, items):
    for k, bound in (("user", users), ("item", items)):
        a = cols[k]
        bad = (a < 0) | (a >= bound)
        if bad.any():
            r = first(bad)
            raise BadInput("%s: row %d: %s %d out of range (expected 0 <= %s < %d)" % (path, r, k, a[r], k, bound))


def check_train(path, cols, users, items):
    check_ids(path, cols, users, items)
    bad = (cols["label"] != 0) & (cols["label"] != 1)
    if bad.any():
        r = first(bad)
        raise BadInput("%s: row %d: label %d is not 0 or 1" % (path, r, cols["label"][r]))
    return cols["label"]


def check_test(path, cols, users, items):
    check_ids(path, cols, users, items)
    n = len(cols["user"])
    if n % GROUP:
        raise BadInput("%s: %d rows is not a multiple of %d (each user: 1 positive + 99 negatives)" % (path, n, GROUP))
    user, item, label = cols["user"], cols["item"], cols["label"]
    bad = label != item
    if bad.any():
        r = first(bad)
        raise BadInput("%s: row %d: label %d is not the row's item %d (the reference's test labels are "
                       "item ids)" % (path, r, label[r], item[r]))
    g_user = user.reshape(-1, GROUP)
    bad = (g_user != g_user[:, :1]).reshape(-1)
    if bad.any():
        r = first(bad)
        raise BadInput("%s: row %d: user %d in the group of user %d (rows %d..%d are one user's candidates)"
                       % (path, r, user[r], user[r - r % GROUP], r - r % GROUP, r - r % GROUP + GROUP - 1))
    g_item = item.reshape(-1, GROUP)
    dup = np.zeros_like(g_item, dtype=bool)
    dup[:, 1:] = g_item[:, 1:] == g_item[:, :1]
    dup = dup.reshape(-1)
    if dup.any():
        r = first(dup)
        raise BadInput("%s: row %d: item %d repeats the group's positive (row %d)"
                       % (path, r, item[r], r - r % GROUP))
    out = np.zeros(n, dtype=np.int64)
    out[::GROUP] = 1
    return out


def write(out_dir, name, split, users, items, cols, labels):
    rows = len(labels)
    body = np.stack([cols["user"], cols["item"], labels], axis=1).astype("<i4")
    tmp = os.path.join(out_dir, ".tmp." + name)
    with open(tmp, "wb") as f:
        f.write(MAGIC + struct.pack("<4i", split, users, items, rows))
        f.write(body.tobytes())
    os.replace(tmp, os.path.join(out_dir, name))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("train_npy")
    ap.add_argument("test_npy")
    ap.add_argument("out_dir")
    ap.add_argument("--users", type=int, default=6040, help="user id bound (reference: 6040)")
    ap.add_argument("--items", type=int, default=3706, help="item id bound (reference: 3706)")
    a = ap.parse_args()
    try:
        for k in ("users", "items"):
            v = getattr(a, k)
            if not 1 <= v <= INT32_MAX:
                raise BadInput("--%s must be in [1, %d], got %d" % (k, INT32_MAX, v))
        train = load_dict(a.train_npy)
        train_labels = check_train(a.train_npy, train, a.users, a.items)
        test = load_dict(a.test_npy)
        test_labels = check_test(a.test_npy, test, a.users, a.items)
        os.makedirs(a.out_dir, exist_ok=True)
        write(a.out_dir, "train.bin", 0, a.users, a.items, train, train_labels)
        write(a.out_dir, "test.bin", 1, a.users, a.items, test, test_labels)
    except BadInput as e:
        print("ncf_npy_export: %s" % e, file=sys.stderr)
        return 1
    print("ncf_npy_export: %s: %d train rows, %d test rows (%d users x %d) -> %s/{train,test}.bin"
          % (a.train_npy, len(train_labels), len(test_labels), len(test_labels) // GROUP, GROUP, a.out_dir))
    return 0


if __name__ == "__main__":
    sys.exit(main())
