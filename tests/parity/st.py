"""Minimal safetensors reader/writer on torch (Debian's python3-torch has no safetensors)."""
import json
import struct

import torch

_DT = {
    torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16", torch.float64: "F64",
    torch.int8: "I8", torch.uint8: "U8", torch.int32: "I32", torch.int64: "I64", torch.bool: "BOOL",
}
_TD = {v: k for k, v in _DT.items()}


def save(path, tensors):
    header, blobs, off = {}, [], 0
    for name, t in tensors.items():
        t = t.detach().contiguous().cpu()
        raw = t.view(torch.int16).numpy().tobytes() if t.dtype == torch.bfloat16 else t.numpy().tobytes()
        header[name] = {"dtype": _DT[t.dtype], "shape": list(t.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def load(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    base = 8 + n
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        b, end = e["data_offsets"]
        dt = _TD[e["dtype"]]
        buf = bytearray(data[base + b:base + end])
        if dt == torch.bfloat16:
            t = torch.frombuffer(buf, dtype=torch.int16).view(torch.bfloat16) if buf else torch.empty(0, dtype=dt)
        else:
            t = torch.frombuffer(buf, dtype=dt) if buf else torch.empty(0, dtype=dt)
        out[name] = t.reshape(e["shape"]).clone()
    return out
