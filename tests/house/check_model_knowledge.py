#!/usr/bin/env python3
"""train/ and infer/ know no model and no layer type (issue 19): what a model or a layer must
decide is asked of it through models/model.h, models/registry.h and layers/module.h.

usage: check_model_knowledge.py SOURCE_DIR AIM_TRAIN

Fails, naming file:line, on a model name (from `aim-train --list`) as a string literal, or a
layer type (the type_name() of every layer in layers/*.h) as a word, in the code of train/ and
infer/ (comments are skipped). --self-test plants both kinds in a temporary tree and expects
two findings.
"""
import os
import re
import subprocess
import sys
import tempfile


def strip_comments(line, in_block):
    out, i = "", 0
    while i < len(line):
        if in_block:
            j = line.find("*/", i)
            if j < 0:
                return out, True
            i, in_block = j + 2, False
        elif line.startswith("//", i):
            break
        elif line.startswith("/*", i):
            in_block, i = True, i + 2
        else:
            out += line[i]
            i += 1
    return out, in_block


def layer_types(src):
    types = set()
    for f in os.listdir(os.path.join(src, "layers")):
        if f.endswith(".h"):
            text = open(os.path.join(src, "layers", f)).read()
            types |= set(re.findall(r'type_name\(\) const override \{ return "(\w+)"', text))
    return types


def findings(src, models, types, folders=("train", "infer")):
    found = []
    for folder in folders:
        for root, _, files in os.walk(os.path.join(src, folder)):
            for f in sorted(files):
                if not f.endswith((".h", ".cpp", ".cu")):
                    continue
                path = os.path.join(root, f)
                in_block = False
                for n, line in enumerate(open(path, errors="replace"), 1):
                    code, in_block = strip_comments(line, in_block)
                    for m in models:
                        if '"%s"' % m in code:
                            found.append("%s:%d: model name \"%s\"" % (path, n, m))
                    for t in types:
                        if re.search(r"\b%s\b" % t, code):
                            found.append("%s:%d: layer type %s" % (path, n, t))
    return found


def self_test():
    with tempfile.TemporaryDirectory() as d:
        os.makedirs(os.path.join(d, "train"))
        os.makedirs(os.path.join(d, "layers"))
        with open(os.path.join(d, "layers", "x.h"), "w") as f:
            f.write('  std::string type_name() const override { return "Widget"; }\n')
        with open(os.path.join(d, "train", "t.cpp"), "w") as f:
            f.write('// Widget and "mymodel" in a comment are fine\n'
                    'if (name == "mymodel") {}\n'
                    'auto* w = dynamic_cast<layers::Widget*>(m);\n')
        got = findings(d, ["mymodel"], layer_types(d))
        ok = len(got) == 2
        print("self-test: %d findings (expected 2)%s" % (len(got), "" if ok else ": " + str(got)))
        return 0 if ok else 1


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    src, train = sys.argv[1], sys.argv[2]
    out = subprocess.run([train, "--list"], capture_output=True, text=True, check=True).stdout
    models = [l.split()[0] for l in out.splitlines() if l and not l[0].isspace()]
    types = layer_types(src)
    found = findings(src, models, types)
    print("train/ and infer/: %d models, %d layer types checked, %d findings" %
          (len(models), len(types), len(found)))
    for f in found:
        print("FAIL: " + f)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
