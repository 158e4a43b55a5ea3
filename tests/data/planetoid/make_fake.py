#!/usr/bin/env python3
"""Writes a tiny fabricated Planetoid set ind.fake.* (no download, no scipy) for the converter test.

    make_fake.py OUT_DIR

Shaped as Kipf's Citeseer files: x/tx/allx pickled as scipy.sparse.csr_matrix objects (a stand-in
class registered under scipy.sparse.csr, pickled with protocol 2 as Python 2 did), y/ty/ally
one-hot numpy arrays, graph a defaultdict of neighbour lists, test.index unsorted with a gap.
  13 nodes, 6 features, 3 classes; allx: nodes 0..7 (y: the first 3); test ids, in file order,
  10 8 12 11 (9 is "isolated": a zero row, no label); tx row k = feature k with value k + 1,
  ty row k = class k % 3; allx row i = features i % 6 and (i + 1) % 6, ally row i = class i % 3.
  graph: 0-1 0-2 2-3 4-7 (both directions listed), 4-4 (a self-loop, listed twice), 5-6, 10-11,
  12-8.
"""
import collections
import os
import pickle
import sys
import types

import numpy as np


def fake_scipy():
    csr = types.ModuleType("scipy.sparse.csr")

    class csr_matrix:  # noqa: N801 - the scipy name is what the pickle records
        def __init__(self, dense):
            dense = np.asarray(dense, dtype=np.float32)
            self._shape = dense.shape
            indptr, indices, data = [0], [], []
            for row in dense:
                nz = np.nonzero(row)[0]
                indices += list(nz)
                data += list(row[nz])
                indptr.append(len(indices))
            self.indptr = np.array(indptr, dtype=np.int32)
            self.indices = np.array(indices, dtype=np.int32)
            self.data = np.array(data, dtype=np.float32)
            self.maxprint = 50

    csr_matrix.__module__ = "scipy.sparse.csr"
    csr_matrix.__qualname__ = "csr_matrix"
    csr.csr_matrix = csr_matrix
    sys.modules.setdefault("scipy", types.ModuleType("scipy"))
    sys.modules.setdefault("scipy.sparse", types.ModuleType("scipy.sparse"))
    sys.modules["scipy.sparse.csr"] = csr
    return csr_matrix


def main(out):
    os.makedirs(out, exist_ok=True)
    csr = fake_scipy()
    F, C = 6, 3
    allx = np.zeros((8, F))
    ally = np.zeros((8, C))
    for i in range(8):
        allx[i, i % F] = 1
        allx[i, (i + 1) % F] = 1
        ally[i, i % C] = 1
    test_order = [10, 8, 12, 11]
    tx = np.zeros((4, F))
    ty = np.zeros((4, C))
    for k in range(4):
        tx[k, k] = k + 1
        ty[k, k % C] = 1
    graph = collections.defaultdict(list)
    for u, v in [(0, 1), (0, 2), (2, 3), (4, 7), (5, 6), (10, 11), (12, 8)]:
        graph[u].append(v)
        graph[v].append(u)
    graph[4] += [4, 4]
    for n in range(13):
        graph[n]  # every node present, in id order (defaultdict creates it)
    graph = collections.defaultdict(list, sorted(graph.items()))
    objs = {"x": csr(allx[:3]), "y": ally[:3], "tx": csr(tx), "ty": ty, "allx": csr(allx),
            "ally": ally, "graph": graph}
    for k, v in objs.items():
        with open(os.path.join(out, "ind.fake." + k), "wb") as f:
            pickle.dump(v, f, protocol=2)
    with open(os.path.join(out, "ind.fake.test.index"), "w") as f:
        f.writelines("%d\n" % i for i in test_order)


if __name__ == "__main__":
    main(sys.argv[1])
