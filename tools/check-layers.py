#!/usr/bin/env python3
"""The layer order of aim, checked (docs/design-notes.md, "Layers").

  tools/check-layers.py [--root DIR]     every `#include "folder/..."` of the source folders
  tools/check-layers.py --libs BUILD     the built layer libraries (libaim_<layer>.a): no layer
                                         uses a symbol that only a layer it may not use defines
  tools/check-layers.py --self-test      both checks fail on a planted upward edge

Exits 1 naming file:line (or library, object and symbol) and the edge for every violation.
A layer may use the layers in ALLOWED[layer] and, through them, everything below (the closure).
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

# The layers, lowest first, and the layers each one may use directly.
ALLOWED = {
    "simt": [],  # kernels/simt: the CPU SIMT executor and the emulated CUDA runtime (a cudart)
    "tensor": ["simt"],
    "kernels": ["tensor"],
    "profiler": ["kernels"],
    "autograd": ["profiler"],
    "layers": ["autograd"],
    "data": ["tensor"],
    "models": ["layers", "data"],
    "train": ["models"],
    "infer": ["models"],
    "cli": ["train", "infer"],
    "programs": ["cli"],  # bench/ and the mains (*_main.cpp): aim-bench, aim-train, aim-infer
}
FOLDERS = ["tensor", "kernels", "autograd", "layers", "models", "data", "train", "infer",
           "profiler", "cli", "bench"]
# The library of a layer when it is not aim_<layer> (the programs are executables).
LIBRARY = {"simt": "aim_simt_runtime"}
# Deliberate exceptions: (layer, included file) -> reason. Listed in docs/design-notes.md.
EXCEPTIONS = {
    ("simt", "tensor/check.h"): "header-only aim::Error and AIM_CHECK: no link dependency",
    ("simt", "tensor/asan.h"): "header-only ASan poisoning macros: no link dependency",
}
SOURCE_EXT = (".h", ".cuh", ".cpp", ".cu", ".def")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([A-Za-z0-9_]+)/([^"]+)"')


def closure(layer):
    seen, todo = set(), list(ALLOWED[layer])
    while todo:
        d = todo.pop()
        if d not in seen:
            seen.add(d)
            todo.extend(ALLOWED[d])
    return seen


def layer_of(path):
    """The layer of a repository-relative path, or None outside the layered folders."""
    parts = path.split("/")
    if parts[0] not in FOLDERS:
        return None
    if parts[0] == "bench" or parts[-1].endswith("_main.cpp"):
        return "programs"
    if parts[0] == "kernels" and len(parts) > 1 and parts[1] == "simt":
        return "simt"
    return parts[0]


def check_includes(root):
    bad = []
    for folder in FOLDERS:
        for dirpath, _, files in os.walk(os.path.join(root, folder)):
            for name in sorted(files):
                if not name.endswith(SOURCE_EXT):
                    continue
                full = os.path.join(dirpath, name)
                rel = os.path.relpath(full, root).replace(os.sep, "/")
                src = layer_of(rel)
                with open(full, encoding="utf-8", errors="replace") as f:
                    for n, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        inc = m.group(1) + "/" + m.group(2)
                        dst = layer_of(inc)
                        if dst is None or dst == src or dst in closure(src):
                            continue
                        if (src, inc) in EXCEPTIONS:
                            continue
                        bad.append(f'{rel}:{n}: #include "{inc}": {src} -> {dst} is against the '
                                   f"layer order ({src} may use: "
                                   f"{', '.join(sorted(closure(src))) or 'nothing'})")
    return bad


def nm_symbols(lib):
    """{object: (defined, undefined)} of the external symbols of a static library."""
    out = subprocess.run(["nm", "-g", "-P", "-A", lib], check=True, capture_output=True,
                         text=True).stdout
    objs = {}
    for line in out.splitlines():
        # "lib.a[obj.o]: symbol T 0 0" (-A names the object in each line)
        head, _, rest = line.partition(": ")
        fields = rest.split()
        if len(fields) < 2:
            continue
        sym, kind = fields[0], fields[1]
        obj = head[head.find("[") + 1:-1] if "[" in head else head
        d, u = objs.setdefault(obj, (set(), set()))
        if kind == "U":
            u.add(sym)
        elif kind not in "wv":  # weak undefined references need no definition
            d.add(sym)
    return objs


def check_libs(build):
    libs = {}
    for layer in ALLOWED:
        path = os.path.join(build, f"lib{LIBRARY.get(layer, 'aim_' + layer)}.a")
        if os.path.exists(path):
            libs[layer] = nm_symbols(path)
    if "tensor" not in libs or "kernels" not in libs:
        return [f"{build}: no libaim_tensor.a / libaim_kernels.a (build first: tools/build.sh)"]
    defined = {layer: set().union(*(d for d, _ in objs.values())) if objs else set()
               for layer, objs in libs.items()}
    bad = []
    for layer, objs in libs.items():
        ok = closure(layer) | {layer}
        for obj, (_, undefined) in sorted(objs.items()):
            for sym in sorted(undefined):
                if any(sym in defined[l] for l in ok if l in defined):
                    continue
                for other in libs:
                    if other not in ok and sym in defined[other]:
                        bad.append(f"{lib_name(layer)}({obj}) uses {demangle(sym)}, defined in "
                                   f"{lib_name(other)}: {layer} -> {other} is against the layer "
                                   "order")
    return bad


def lib_name(layer):
    return f"lib{LIBRARY.get(layer, 'aim_' + layer)}.a"


def demangle(sym):
    try:
        return subprocess.run(["c++filt", sym], check=True, capture_output=True,
                              text=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return sym


def self_test():
    """The include check passes a clean tree and fails a planted upward include, naming it; the
    library check fails on a lower layer calling a function only an upper layer defines."""
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        def write(rel, text):
            os.makedirs(os.path.dirname(os.path.join(tmp, rel)), exist_ok=True)
            with open(os.path.join(tmp, rel), "w") as f:
                f.write(text)
        write("tensor/tensor.h", '#pragma once\n#include "tensor/check.h"\n')
        write("tensor/check.h", "#pragma once\n")
        write("kernels/op.h", '#pragma once\n#include "tensor/tensor.h"\n')
        write("kernels/simt/device/runtime.cpp", '#include "tensor/check.h"\n')
        write("autograd/engine.cpp", '#include "profiler/profiler.h"\n#include "kernels/op.h"\n')
        write("train/aim_train_main.cpp", '#include "cli/common.h"\n')
        if check_includes(tmp):
            failures.append(f"clean tree reported: {check_includes(tmp)}")
        write("tensor/tensor.cpp", '#include "tensor/tensor.h"\n\n#include "kernels/op.h"\n')
        write("data/source.h", '#include "models/model.h"\n')
        write("kernels/simt/simt.h", '#include "tensor/tensor.h"\n')  # only check.h is excepted
        bad = check_includes(tmp)
        for want in ['tensor/tensor.cpp:3: #include "kernels/op.h": tensor -> kernels',
                     'data/source.h:1: #include "models/model.h": data -> models',
                     'kernels/simt/simt.h:1: #include "tensor/tensor.h": simt -> tensor']:
            if not any(b.startswith(want) for b in bad):
                failures.append(f"planted upward include not reported: {want} (got {bad})")
        if len(bad) != 3:
            failures.append(f"expected 3 violations, got {bad}")
        cxx = shutil.which("c++")
        if cxx:  # tensor calls a function only kernels defines: the library check names it
            libs = {"tensor": "void kernel_fill(); void tensor_fill() { kernel_fill(); }\n",
                    "kernels": "void tensor_fill(); void kernel_fill() {}\n"
                               "void kernel_copy() { tensor_fill(); }\n"}
            for layer, code in libs.items():
                src = os.path.join(tmp, f"{layer}.cpp")
                with open(src, "w") as f:
                    f.write(code)
                obj = os.path.join(tmp, f"{layer}.o")
                subprocess.run([cxx, "-c", src, "-o", obj], check=True)
                subprocess.run(["ar", "rcs", os.path.join(tmp, f"libaim_{layer}.a"), obj],
                               check=True)
            bad = check_libs(tmp)
            if len(bad) != 1 or "libaim_tensor.a(tensor.o) uses kernel_fill()" not in bad[0]:
                failures.append(f"library check: expected tensor -> kernels, got {bad}")
    for f in failures:
        print(f"[check-layers] self-test FAILED: {f}", file=sys.stderr)
    if not failures:
        print("[check-layers] self-test: planted upward include and symbol reported")
    return 1 if failures else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    ap.add_argument("--libs", metavar="BUILD", help="check the layer libraries in BUILD")
    ap.add_argument("--self-test", action="store_true")
    a = ap.parse_args()
    if a.self_test:
        return self_test()
    bad = check_libs(a.libs) if a.libs else check_includes(a.root)
    for b in bad:
        print(b, file=sys.stderr)
    what = f"libraries in {a.libs}" if a.libs else f"includes under {a.root}"
    if bad:
        print(f"[check-layers] {len(bad)} edge(s) against the layer order in the {what}",
              file=sys.stderr)
        return 1
    print(f"[check-layers] the {what} follow the layer order")
    return 0


if __name__ == "__main__":
    sys.exit(main())
