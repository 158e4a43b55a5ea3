#!/usr/bin/env python3
"""Write a small fake DIN dataset.pkl with exactly the structure of the reference's
din/build_dataset.py (DeepInterestNetwork), for testing tools/din_pickle_export.py and the C++
reader (data/din_export.h) without the real Amazon data.

Usage: make_fake_din_pickle.py OUT.pkl [--break KIND]

Like build_dataset.py: a few fake users, each with a time-ordered list of positive items; for
i = 1 .. n-2 the train tuples (uid, pos[:i], pos[i], 1) and (uid, pos[:i], neg[i], 0); the last
item becomes the test tuple (uid, pos[:n-1], (pos[n-1], neg[n-1])); both lists shuffled with
random.seed(1234); then four pickles one after another in the same file: train_set, test_set,
cate_list (numpy int32 array, item -> category), (user_count, item_count, cate_count).
Protocol 2 (Python 2's HIGHEST_PROTOCOL). uids are numpy int64 as pandas' groupby yields them;
item ids are Python ints (Series.tolist()).

Fake world (the C++ end-to-end test relies on it): 6 users, 30 items, 4 categories, category of
item k = k % 4; user u has 3 + u positive items.

--break KIND writes a malformed file instead (for the exporter's error tests):
  train_tuple  train_set[3] has 3 fields instead of 4
  item_range   test_set[2]'s positive item is item_count (out of range)
  empty_hist   train_set[5] has an empty history
  cate_range   cate_list[7] = cate_count
"""
import pickle
import random
import sys

import numpy as np

USERS, ITEMS, CATES = 6, 30, 4


def build():
    rng = random.Random(99)
    reviews = {u: rng.sample(range(ITEMS), 3 + u) for u in range(USERS)}  # time order
    random.seed(1234)
    train_set, test_set = [], []
    for reviewer_id in range(USERS):
        uid = np.int64(reviewer_id)
        pos_list = reviews[reviewer_id]

        def gen_neg():
            neg = pos_list[0]
            while neg in pos_list:
                neg = random.randint(0, ITEMS - 1)
            return neg

        neg_list = [gen_neg() for _ in range(len(pos_list))]
        for i in range(1, len(pos_list)):
            hist = pos_list[:i]
            if i != len(pos_list) - 1:
                train_set.append((uid, hist, pos_list[i], 1))
                train_set.append((uid, hist, neg_list[i], 0))
            else:
                test_set.append((uid, hist, (pos_list[i], neg_list[i])))
    random.shuffle(train_set)
    random.shuffle(test_set)
    assert len(test_set) == USERS
    cate_list = np.array([k % CATES for k in range(ITEMS)], dtype=np.int32)
    return train_set, test_set, cate_list


def main(argv):
    if len(argv) not in (2, 4) or (len(argv) == 4 and argv[2] != "--break"):
        sys.exit("usage: make_fake_din_pickle.py OUT.pkl [--break KIND]")
    train_set, test_set, cate_list = build()
    kind = argv[3] if len(argv) == 4 else None
    if kind == "train_tuple":
        train_set[3] = train_set[3][:3]
    elif kind == "item_range":
        u, h, (p, n) = test_set[2]
        test_set[2] = (u, h, (ITEMS, n))
    elif kind == "empty_hist":
        u, h, i, l = train_set[5]
        train_set[5] = (u, [], i, l)
    elif kind == "cate_range":
        cate_list[7] = CATES
    elif kind is not None:
        sys.exit("make_fake_din_pickle.py: unknown --break kind '%s'" % kind)
    with open(argv[1], "wb") as f:
        pickle.dump(train_set, f, 2)
        pickle.dump(test_set, f, 2)
        pickle.dump(cate_list, f, 2)
        pickle.dump((USERS, ITEMS, CATES), f, 2)


if __name__ == "__main__":
    main(sys.argv)
