#!/usr/bin/env python3
"""Writes a small DIEN data directory in the reference's layout (MODELS.md §4.2) with a learnable
signal, for the CLI test of `aim-train dien --data DIR`:

  local_train_splitByUser, local_test_splitByUser   label uid mid cat mid_hist cat_hist (0x02)
  uid_voc.pkl, mid_voc.pkl, cat_voc.pkl             pickled dicts token -> id (as generate_voc.py:
                                                    by descending frequency, mid/cat id 0 =
                                                    default_mid/default_cat)
  item-info, reviews-info

Users click mostly in their two favourite categories; each sample is a (non-click, click) pair:
the click from a favourite category, the non-click from any category. The vocabularies are left
as pickles: tools/dien_vocab_from_pkl.py converts them.

Usage: make_fake_dien_dir.py DIR [--users 40] [--train-pairs 400] [--test-pairs 80] [--seed 1]
"""
import argparse
import collections
import os
import pickle
import random

ap = argparse.ArgumentParser()
ap.add_argument("dir")
ap.add_argument("--users", type=int, default=40)
ap.add_argument("--train-pairs", type=int, default=400)
ap.add_argument("--test-pairs", type=int, default=80)
ap.add_argument("--seed", type=int, default=1)
a = ap.parse_args()
rng = random.Random(a.seed)
os.makedirs(a.dir, exist_ok=True)

n_cat, per_cat = 8, 12
cats = ["Books/Cat%d" % c for c in range(n_cat)]
items = ["B%05d" % i for i in range(n_cat * per_cat)]
cat_of = {it: cats[i // per_cat] for i, it in enumerate(items)}
users = ["U%04d" % u for u in range(a.users)]
fav = {u: rng.sample(range(n_cat), 2) for u in users}


def pick(c):
    return items[c * per_cat + rng.randrange(per_cat)]


def history(u):
    h = [pick(rng.choice(fav[u]) if rng.random() < 0.8 else rng.randrange(n_cat))
         for _ in range(rng.randint(1, 12))]
    return h


def pairs(n):
    lines = []
    for _ in range(n):
        u = rng.choice(users)
        h = history(u)
        hs, cs = "\x02".join(h), "\x02".join(cat_of[i] for i in h)
        neg, pos = pick(rng.randrange(n_cat)), pick(rng.choice(fav[u]))
        lines.append("0\t%s\t%s\t%s\t%s\t%s\n" % (u, neg, cat_of[neg], hs, cs))
        lines.append("1\t%s\t%s\t%s\t%s\t%s\n" % (u, pos, cat_of[pos], hs, cs))
    return lines


train, test = pairs(a.train_pairs), pairs(a.test_pairs)
for name, lines in (("local_train_splitByUser", train), ("local_test_splitByUser", test)):
    with open(os.path.join(a.dir, name), "w") as f:
        f.writelines(lines)

# Vocabularies as generate_voc.py builds them: counts over the training file, descending.
cu, cm, cc = collections.Counter(), collections.Counter(), collections.Counter()
for ln in train:
    f = ln.rstrip("\n").split("\t")
    cu[f[1]] += 1
    cm[f[2]] += 1
    cc[f[3]] += 1
    for m in f[4].split("\x02"):
        cm[m] += 1
    for c in f[5].split("\x02"):
        cc[c] += 1


def voc(counter, default):
    d = {} if default is None else {default: 0}
    for k, _ in sorted(counter.items(), key=lambda kv: (-kv[1], kv[0])):
        d[k] = len(d)
    return d


for name, d in (("uid_voc.pkl", voc(cu, None)), ("mid_voc.pkl", voc(cm, "default_mid")),
                ("cat_voc.pkl", voc(cc, "default_cat"))):
    with open(os.path.join(a.dir, name), "wb") as f:
        pickle.dump(d, f, protocol=2)

with open(os.path.join(a.dir, "item-info"), "w") as f:
    for it in items:
        f.write("%s\t%s\n" % (it, cat_of[it]))
with open(os.path.join(a.dir, "reviews-info"), "w") as f:
    for k in range(2000):
        f.write("%s\t%s\t5.0\t%d\n" % (rng.choice(users), rng.choice(items), 1300000000 + k))
