#!/usr/bin/env python3
"""Converts a Planetoid citation set (Kipf's gcn/data/ind.<name>.*) into the text files aim reads.

    planetoid_convert.py DATA_DIR NAME OUT_DIR [--val 500]   e.g. ... gcn/data cora out/cora
    aim-train gcn --data planetoid:out/cora --config features=1433 --config classes=7

Input (MODELS.md §7): ind.NAME.{x,tx,allx} scipy CSR feature matrices, ind.NAME.{y,ty,ally}
one-hot numpy label arrays, ind.NAME.graph a dict node -> neighbour list (Python 2 pickles), and
ind.NAME.test.index, one test node id per line. Replicates gcn/utils.py load_data:
  * Citeseer (any set whose test ids are not contiguous): the missing ("isolated") test ids get
    zero feature rows and zero label rows (tx_extended / ty_extended);
  * features = vstack(allx, tx), labels = vstack(ally, ty), then rows test_idx_reorder take the
    rows test_idx_range (the sorted ids): features[reorder] = features[sorted];
  * train = range(len(y)), val = range(len(y), len(y) + 500) (--val: 500, Kipf's; smaller only
    for tiny test sets), test = the sorted test ids;
  * the graph: nx.from_dict_of_lists (undirected; aim symmetrises and collapses duplicates), node
    ids are the row ids (Kipf's code assumes the dict's nodes are 0..N-1 in order).
scipy is not needed: the pickled csr_matrix objects are read into a stand-in class (their state
is data / indices / indptr / shape); numpy is.

Output (OUT_DIR, plain text, '#' lines are comments; documented in docs/gcn.md):
  meta.txt      "NAME nodes features classes"
  features.txt  "node feature value" per nonzero (raw values: aim row-normalises, as Kipf)
  labels.txt    one class per node (argmax of its one-hot row); -1 for a zero row outside every
                split (Citeseer's isolated nodes); a zero row inside a split gets 0, Kipf's argmax
  edges.txt     "u v" per neighbour-list entry
  train.txt, val.txt, test.txt   one node id per line
"""
import os
import pickle
import sys

import numpy as np


class _SparseStandIn:
    """What a pickled scipy.sparse csr/csc/lil matrix unpickles into without scipy."""

    def __setstate__(self, state):
        self.__dict__.update(state)

    def toarray(self):
        shape = self.__dict__.get("_shape") or self.__dict__.get("shape")
        fmt = type(self).fmt
        out = np.zeros(shape, dtype=np.float32)
        if fmt in ("csr", "csc"):
            indptr, indices, data = self.indptr, self.indices, self.data
            for r in range(len(indptr) - 1):
                for e in range(indptr[r], indptr[r + 1]):
                    if fmt == "csr":
                        out[r, indices[e]] += data[e]
                    else:
                        out[indices[e], r] += data[e]
            return out
        raise ValueError("unsupported pickled sparse format %r" % fmt)


def _stand_in(fmt):
    return type("StandIn_" + fmt, (_SparseStandIn,), {"fmt": fmt})


class _Unpickler(pickle.Unpickler):
    def find_class(self, module, name):
        if module.startswith("scipy.sparse"):
            if name in ("csr_matrix", "csc_matrix"):
                return _stand_in(name[:3])
            raise pickle.UnpicklingError("unsupported scipy class %s.%s" % (module, name))
        return super().find_class(module, name)


def _load(path):
    if not os.path.exists(path):
        sys.exit("planetoid_convert: missing %s" % path)
    with open(path, "rb") as f:
        try:
            return _Unpickler(f, encoding="latin1").load()
        except Exception as e:  # noqa: BLE001 - name the file
            sys.exit("planetoid_convert: cannot unpickle %s: %s" % (path, e))


def _dense(m, path):
    if isinstance(m, _SparseStandIn):
        return m.toarray()
    a = np.asarray(m, dtype=np.float32)
    if a.ndim != 2:
        sys.exit("planetoid_convert: %s is not a 2-d matrix (shape %s)" % (path, a.shape))
    return a


def load(data_dir, name, n_val=500):
    base = os.path.join(data_dir, "ind.%s." % name)
    obj = {k: _load(base + k) for k in ("x", "y", "tx", "ty", "allx", "ally", "graph")}
    x, tx, allx = (_dense(obj[k], base + k) for k in ("x", "tx", "allx"))
    y, ty, ally = (np.asarray(obj[k], dtype=np.float32) for k in ("y", "ty", "ally"))
    graph = obj["graph"]
    test_reorder = []
    with open(base + "test.index") as f:
        for n, line in enumerate(f, 1):
            if line.strip():
                try:
                    test_reorder.append(int(line))
                except ValueError:
                    sys.exit("planetoid_convert: %stest.index:%d: %r is not a node id"
                             % (base, n, line.strip()))
    test_range = np.sort(test_reorder)
    lo, hi = int(test_range[0]), int(test_range[-1])
    if hi - lo + 1 != len(test_range):  # Citeseer: isolated test nodes (utils.py's fix)
        full = hi - lo + 1
        tx_ext = np.zeros((full, x.shape[1]), dtype=np.float32)
        tx_ext[test_range - lo, :] = tx
        tx = tx_ext
        ty_ext = np.zeros((full, y.shape[1]), dtype=np.float32)
        ty_ext[test_range - lo, :] = ty
        ty = ty_ext
    features = np.vstack((allx, tx))
    features[test_reorder, :] = features[test_range, :]
    labels = np.vstack((ally, ty))
    labels[test_reorder, :] = labels[test_range, :]
    train = list(range(len(y)))
    val = list(range(len(y), len(y) + n_val))
    test = [int(i) for i in test_range]
    nodes = features.shape[0]
    if len(train) + len(val) > nodes:
        sys.exit("planetoid_convert: train + val (%d + %d nodes) exceed the %d nodes (--val)"
                 % (len(train), len(val), nodes))
    if list(graph.keys()) != sorted(graph.keys()):
        print("planetoid_convert: warning: the graph's nodes are not in id order; node ids are "
              "taken as row ids", file=sys.stderr)
    edges = []
    for u, nbrs in graph.items():
        for v in nbrs:
            if not (0 <= u < nodes and 0 <= v < nodes):
                sys.exit("planetoid_convert: %sgraph: edge (%d, %d) outside the %d nodes"
                         % (base, u, v, nodes))
            edges.append((int(u), int(v)))
    in_split = np.zeros(nodes, dtype=bool)
    in_split[train + val + test] = True
    has = labels.sum(1) > 0
    lab = np.where(has, labels.argmax(1), np.where(in_split, 0, -1))
    return features, lab, edges, train, val, test, labels.shape[1]


def write(out_dir, name, features, labels, edges, train, val, test, classes):
    os.makedirs(out_dir, exist_ok=True)
    nodes, nfeat = features.shape
    with open(os.path.join(out_dir, "meta.txt"), "w") as f:
        f.write("# name nodes features classes (tools/planetoid_convert.py)\n")
        f.write("%s %d %d %d\n" % (name, nodes, nfeat, classes))
    with open(os.path.join(out_dir, "features.txt"), "w") as f:
        f.write("# node feature value\n")
        rows, cols = np.nonzero(features)
        for r, c in zip(rows, cols):
            f.write("%d %d %r\n" % (r, c, float(features[r, c])))
    with open(os.path.join(out_dir, "labels.txt"), "w") as f:
        f.writelines("%d\n" % int(v) for v in labels)
    with open(os.path.join(out_dir, "edges.txt"), "w") as f:
        f.writelines("%d %d\n" % e for e in edges)
    for fname, ids in (("train.txt", train), ("val.txt", val), ("test.txt", test)):
        with open(os.path.join(out_dir, fname), "w") as f:
            f.writelines("%d\n" % i for i in ids)


def main(argv):
    import argparse
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("data_dir")
    ap.add_argument("name")
    ap.add_argument("out_dir")
    ap.add_argument("--val", type=int, default=500, help="validation nodes after the training ones")
    a = ap.parse_args(argv[1:])
    data_dir, name, out_dir = a.data_dir, a.name, a.out_dir
    features, labels, edges, train, val, test, classes = load(data_dir, name, a.val)
    write(out_dir, name, features, labels, edges, train, val, test, classes)
    print("planetoid_convert: %s: %d nodes, %d features, %d classes, %d edge entries, "
          "train %d, val %d, test %d -> %s" % (name, features.shape[0], features.shape[1], classes,
                                               len(edges), len(train), len(val), len(test),
                                               out_dir))


if __name__ == "__main__":
    main(sys.argv)
