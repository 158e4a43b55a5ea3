#!/usr/bin/env bash
# Registers and local-memory spills of every own CUDA kernel (kernels/**/*.cu) for sm_90, read
# from the objects the build already produced: nothing is recompiled, so it costs seconds.
#
# Usage: tools/ptxas-check.sh [build-dir]   (default: ./build, after building target aim_kernels)
#
# For each build-dir/CMakeFiles/aim_kernels.dir/kernels/**/*.cu.o (the kernels layer's library)
# it takes the sm_90 cubin and the PTX out of the object's fat binary (zstd- or LZ4-compressed by
# nvcc, or plain) and prints, per function (kernels, and device functions ptxas kept as calls):
#   regs    EIATTR_REGCOUNT of the cubin's .nv.info: `ptxas -v`'s "Used N registers"
#   frame   EIATTR_FRAME_SIZE: "N bytes stack frame"
#   array   bytes of local arrays the PTX declares (__local_depot of the function and of the
#           largest function it calls, which ptxas inlines: libdevice's double sin/cos slow path)
#   spill   frame - array (array rounded up to 8): the stack the register allocator added, i.e.
#           spilling. Non-zero exactly when `ptxas -v` reports spill stores (checked against it
#           on softmax, before and after its fix, and random).
#   st/ld   bytes moved by the function's STL/LDL instructions, counted in its SASS: all local
#           traffic, arrays included (with no array, exactly `ptxas -v`'s spill stores/loads).
# (cuobjdump -res-usage would give REG and STACK only, and this toolkit has no cuobjdump.)
# Exits 1 when a function spills that no line of tools/ptxas-allow.txt names (a line: a
# substring of the demangled name, then the reason; "SUBSTRING -- REASON" when the substring has
# spaces), 2 when there are no objects to read (build the `aim_kernels` target with CUDA on
# first), else 0. About a second for all kernels.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build}"
exec python3 - "$root" "$build" <<'PY'
import glob, os, re, struct, subprocess, sys

root, build = sys.argv[1], sys.argv[2]
objdir = os.path.join(build, "CMakeFiles", "aim_kernels.dir")
objs = sorted(glob.glob(os.path.join(objdir, "kernels", "**", "*.cu.o"), recursive=True))
if not objs:
    print(f"[ptxas-check] no kernels/**/*.cu.o under {objdir}: configure with CUDA on and build "
          "the aim_kernels target first (tools/build.sh, or ninja -C build aim_kernels)",
          file=sys.stderr)
    sys.exit(2)

allow = []  # (substring, reason)
allow_path = os.path.join(root, "tools", "ptxas-allow.txt")
if os.path.exists(allow_path):
    for line in open(allow_path):
        line = line.strip()
        if line and not line.startswith("#"):
            sep = " -- " if " -- " in line else " "
            sub, _, why = line.partition(sep)
            allow.append((sub, why.strip()))


def lz4_block(src, size):  # LZ4 block format (older nvcc fat-binary compression)
    out, i = bytearray(), 0
    while i < len(src):
        tok = src[i]; i += 1
        n = tok >> 4
        if n == 15:
            while True:
                b = src[i]; i += 1; n += b
                if b != 255: break
        out += src[i:i + n]; i += n
        if i >= len(src) or len(out) >= size: break
        off = src[i] | (src[i + 1] << 8); i += 2
        m = tok & 15
        if m == 15:
            while True:
                b = src[i]; i += 1; m += b
                if b != 255: break
        m += 4
        for _ in range(m): out.append(out[-off])
    return bytes(out)


def images(obj):
    """The sm_90 cubins and PTX texts of an object's .nv_fatbin section."""
    fat = subprocess.run(["objcopy", "-O", "binary", "--only-section=.nv_fatbin", obj, "/dev/stdout"],
                         check=True, capture_output=True).stdout
    out, ptx, pos = [], [], 0
    while pos + 16 <= len(fat):
        magic, _, hsize, fsize = struct.unpack_from("<IHHQ", fat, pos)
        if magic != 0xBA55ED50: break
        off, end = pos + hsize, pos + hsize + fsize
        while off < end:
            kind, _, ehs, size = struct.unpack_from("<HHIQ", fat, off)
            payload_size, = struct.unpack_from("<I", fat, off + 16)
            arch, = struct.unpack_from("<I", fat, off + 28)
            flags, = struct.unpack_from("<Q", fat, off + 40)
            dsize, = struct.unpack_from("<Q", fat, off + 56)
            data = fat[off + ehs:off + ehs + size]
            if kind in (1, 2) and arch == 90:
                if data[:4] == b"\x28\xb5\x2f\xfd":
                    try:
                        data = subprocess.run(["zstd", "-d", "-c", "-q"], input=data[:payload_size],
                                              check=True, capture_output=True).stdout
                    except FileNotFoundError:
                        print("[ptxas-check] nvcc compressed the fat binary with zstd and there is no "
                              "zstd here (apt-get install zstd)", file=sys.stderr)
                        sys.exit(2)
                elif flags & 0x2000:
                    data = lz4_block(data[:payload_size], dsize)
                if kind == 2:
                    if data[:4] != b"\x7fELF":
                        raise SystemExit(f"[ptxas-check] {obj}: cannot read its sm_90 cubin")
                    out.append(data)
                else:
                    ptx.append(data.rstrip(b"\0").decode("utf-8", "replace"))
            off += ehs + size
        pos = end
    return out, ptx


def depots(ptx):
    """Bytes of local arrays each PTX function declares (its __local_depot), plus the largest of
    the functions it calls (ptxas inlines them: libdevice's double sin/cos slow path keeps a
    40-byte array): the part of the stack frame that is not spilling."""
    own, body, cur = {}, {}, None
    head = re.compile(r"^\s*(?:\.visible\s+|\.weak\s+|\.extern\s+)*\.(?:entry|func)\s+"
                      r"(?:\([^)]*\)\s*)?([A-Za-z_$][\w$]*)")
    for line in ptx.splitlines():
        m = head.match(line)
        if m:
            cur = m.group(1)
            own.setdefault(cur, 0)
            body[cur] = []
            continue
        if cur is None:
            continue
        m = re.search(r"__local_depot\d+\[(\d+)\]", line)
        if m and ".local" in line:
            own[cur] += int(m.group(1))
        body[cur].append(line)
    with_depot = [f for f, b in own.items() if b]
    calls = {f: [g for g in with_depot if g != f and any(g in l for l in body[f] if "call" in l
                                                             or l.strip().startswith(g))]
             for f in own}
    memo = {}

    def total(f, depth=0):
        if f not in memo:
            sub = [total(g, depth + 1) for g in calls.get(f, [])] if depth < 8 else []
            memo[f] = own.get(f, 0) + max(sub, default=0)
        return memo[f]

    return {f: total(f) for f in own}


# SASS (sm_90, 128-bit instructions): opcode in bits 0..11; for STL and LDL bits 73..75 hold the
# access size.
STL, LDL = 0x387, 0x983
SIZE = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 8, 6: 16, 7: 16}


def functions(d):
    shoff, = struct.unpack_from("<Q", d, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", d, 0x3A)
    secs = []
    for i in range(shnum):
        name, typ, _, _, off, size, link, info, _, _ = struct.unpack_from("<IIQQQQIIQQ", d,
                                                                         shoff + i * shentsize)
        secs.append([name, typ, off, size, link, info])
    so = secs[shstrndx][2]
    for s in secs:
        s[0] = d[so + s[0]:d.index(b"\0", so + s[0])].decode()
    symtab = next(s for s in secs if s[1] == 2)
    stro = secs[symtab[4]][2]
    syms = []
    for i in range(symtab[3] // 24):
        n, = struct.unpack_from("<I", d, symtab[2] + i * 24)
        syms.append(d[stro + n:d.index(b"\0", stro + n)].decode())
    regs, frame = {}, {}
    for s in secs:
        if s[0] != ".nv.info": continue
        p, end = s[2], s[2] + s[3]
        while p < end:
            fmt, attr = d[p], d[p + 1]
            if fmt == 4:  # EIFMT_SVAL: u16 size, then the value
                sz, = struct.unpack_from("<H", d, p + 2)
                if attr in (0x2F, 0x11) and sz >= 8:
                    sym, val = struct.unpack_from("<II", d, p + 4)
                    (regs if attr == 0x2F else frame)[syms[sym]] = val
                p += 4 + sz
            else:
                p += 4
    out = []
    for s in secs:
        if not s[0].startswith(".text."): continue
        name = s[0][6:]
        st = ld = 0
        for i in range(s[2], s[2] + s[3] - 15, 16):
            lo, hi = struct.unpack_from("<QQ", d, i)
            op = lo & 0xFFF
            if op == STL: st += SIZE[(hi >> 9) & 7]
            elif op == LDL: ld += SIZE[(hi >> 9) & 7]
        out.append((name, regs.get(name, 0), frame.get(name, 0), st, ld))
    return out


rows = []
for obj in objs:
    rel = os.path.relpath(obj, objdir)[:-len(".o")]
    src = os.path.join(root, rel)
    if os.path.exists(src) and os.path.getmtime(src) > os.path.getmtime(obj):
        print(f"[ptxas-check] warning: {rel} is newer than its object; rebuild for current numbers",
              file=sys.stderr)
    cubs, ptxs = images(obj)
    dep = {}
    for p in ptxs:
        dep.update(depots(p))
    for cub in cubs:
        for f in functions(cub):
            rows.append((rel,) + f + (dep.get(f[0], 0),))

mangled = [r[1] for r in rows]
dem = subprocess.run(["c++filt"], input="\n".join(mangled), capture_output=True, text=True,
                     check=True).stdout.split("\n")


def short(n):
    n = re.sub(r"aim::kernels::(cuda|AIM_CUDA_NS)::", "", n)
    n = n.replace("(anonymous namespace)::", "").replace("__nv_bfloat16", "bf16")
    n = n.replace("__half", "f16")
    if n.startswith("void "): n = n[5:]
    depth = 0  # drop the parameter list: the last top-level "(...)"
    for i in range(len(n) - 1, -1, -1):
        depth += n[i] == ")"
        depth -= n[i] == "("
        if depth == 0 and n[i] == "(":
            return n[:i]
    return n


bad, allowed, used = [], [], set()
table = []
for r, d in zip(rows, dem):
    rel, _, reg, fr, st, ld, arr = r
    name = short(d)
    status = "ok"
    spill = max(0, fr - (arr + 7) // 8 * 8)  # frame bytes that no local array explains
    if spill:
        hit = next((a for a in allow if a[0] in d or a[0] in name), None)
        if hit:
            status = "allowed"
            used.add(hit[0])
            allowed.append(name)
        else:
            status = "SPILL"
            bad.append((rel, name))
    table.append((rel.replace("kernels/", "", 1), name, reg, fr, arr, spill, st, ld, status))

w_obj = max(len(t[0]) for t in table)
w_name = min(110, max(len(t[1]) for t in table))
print(f"{'object':<{w_obj}}  {'function':<{w_name}}  {'regs':>4}  {'frame':>5}  {'array':>5}  "
      f"{'spill':>5}  {'st B':>5}  {'ld B':>5}  status")
for t in table:
    print(f"{t[0]:<{w_obj}}  {t[1]:<{w_name}}  {t[2]:>4}  {t[3]:>5}  {t[4]:>5}  {t[5]:>5}  "
          f"{t[6]:>5}  {t[7]:>5}  {t[8]}")
for sub, why in allow:
    if sub not in used:
        print(f"[ptxas-check] note: allowlist line '{sub}' matches no spilling function",
              file=sys.stderr)
print(f"[ptxas-check] {len(table)} functions in {len(objs)} objects (sm_90): {len(bad)} spill, "
      f"{len(allowed)} allowed to (tools/ptxas-allow.txt)")
if bad:
    for rel, name in bad:
        print(f"[ptxas-check] SPILL {rel}: {name}", file=sys.stderr)
    sys.exit(1)
PY
