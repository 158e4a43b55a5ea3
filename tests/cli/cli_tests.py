#!/usr/bin/env python3
"""End-to-end tests of the model command lines (aim-train, aim-infer) on the tiny DIN.

Usage: cli_tests.py BUILD_DIR SOURCE_DIR

Checks: --list; every bad flag or value exits 2 naming the flag and what is allowed; runtime
errors (missing data, corrupt weights, wrong input shapes) exit 1 naming the file/tensor; the
train -> checkpoint -> resume -> save weights -> infer -> dump -> re-infer round trip; a batch-size
sweep writes one results line per size with the documented fields; training on a DIN export made
from a fake dataset.pkl by tools/din_pickle_export.py reports AUC and GAUC.
"""
import json
import re
import os
import subprocess
import sys
import tempfile

BUILD, SOURCE = sys.argv[1], sys.argv[2]
TRAIN = os.path.join(BUILD, "aim-train")
INFER = os.path.join(BUILD, "aim-infer")
TINY = ["--device", "cpu", "--config", "size=tiny", "--threads", "2"]
failures = []


def run(args, expect_rc, *fragments, where=None):
    p = subprocess.run(args, capture_output=True, text=True, timeout=600)
    out = p.stdout + p.stderr
    name = where or " ".join(os.path.basename(a) if i == 0 else a for i, a in enumerate(args))
    if p.returncode != expect_rc:
        failures.append("%s: exit %d, expected %d\n%s" % (name, p.returncode, expect_rc, out[-2000:]))
        return out
    for f in fragments:
        if f not in out:
            failures.append("%s: output lacks %r\n%s" % (name, f, out[-2000:]))
    return out


def results(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def check(cond, what):
    if not cond:
        failures.append(what)


# ---- listing and help ------------------------------------------------------------------------
run([TRAIN, "--list"], 0, "din", "--config act=sigmoid|dice", "metrics: auc gauc")
run([INFER, "--list"], 0, "din")
run([TRAIN, "--help"], 0, "--batch-size", "--resume", "--save-weights")
run([INFER, "--help"], 0, "--iters", "--dump-outputs", "--list-inputs")
run([INFER, "nmt", "--config", "size=tiny", "--config", "decoder=greedy", "--batch-size", "8",
     "--iters", "1", "--warmup", "0", "--device", "cpu", "--eval-samples", "16"], 0,
    "samples/s", "tokens/s (", "metrics on 16 evaluation samples (fp32", "bleu ")
run([INFER, "nmt", "--config", "size=tiny", "--iters", "1", "--eval-samples", "-1"], 2,
    "--eval-samples must be >= 0")
run([INFER, "din", "--config", "size=tiny", "--list-inputs"], 0, "hist_item", "i64", "[B, T]",
    "output")

# ---- bad flags and values: exit 2, naming the flag and what is allowed ------------------------
bad = [
    ([INFER, "din", "--fp16", "--int8"], "give one of --precision, --fp16, --bf16, --int8"),
    ([INFER, "din", "--precision", "fp8"], "--precision 'fp8': allowed: fp32, fp16, bf16, int8"),
    ([INFER, "din", "--calib-batches", "4"], "--calib*, --save-quantized and --load-quantized need --int8"),
    ([INFER, "din", "--int8", "--calib", "mse"], "--calib 'mse' is not allowed (allowed: max, percentile)"),
    ([INFER, "din", "--device", "cpu", "--cuda-graph"], "--cuda-graph needs a CUDA device"),
    ([TRAIN, "din", "--precision", "fp64"], "--precision 'fp64': allowed: fp32, fp16, bf16"),
    ([TRAIN, "din", "--optimizer", "bogus"], "--optimizer 'bogus'", "allowed: sgd, adam"),
    ([TRAIN, "din", "--batch-size", "64,x"], "--batch-size", "not a positive integer"),
    ([TRAIN, "din", "--batch-size", "0"], "--batch-size", "not a positive integer"),
    ([TRAIN, "din", "--config", "act=relu"], "act='relu'", "allowed: sigmoid, dice"),
    ([TRAIN, "din", "--config", "colour=red"], "'colour'", "allowed: size, act"),
    ([TRAIN, "din", "--config", "size"], "--config 'size'", "key=value"),
    ([TRAIN, "bogus"], "unknown model 'bogus'", "allowed: din"),
    ([TRAIN], "missing MODEL"),
    ([TRAIN, "din", "--device", "tpu"], "--device 'tpu'", "allowed: cpu, cuda, cuda:N"),
    ([TRAIN, "din", "--steps", "0"], "--steps must be > 0"),
    ([TRAIN, "din", "--lr", "-1"], "--lr must be > 0"),
    ([TRAIN, "din", "--schedule", "cyclic"], "--schedule 'cyclic'", "warmup_cosine"),
    ([TRAIN, "din", "--resume"], "--resume needs --checkpoint-dir"),
    ([TRAIN, "din", "--nesterov"], "--nesterov needs --optimizer sgd"),
    ([TRAIN, "din", "--progress", "fancy"], "--progress 'fancy'"),
    ([TRAIN, "din", "--frobnicate"], "frobnicate"),
    ([TRAIN, "din", "--steps", "ten"], "steps"),
    ([INFER, "din", "--iters", "0"], "--iters must be > 0"),
    ([INFER, "din", "--warmup", "-1"], "--warmup must be >= 0"),
    ([INFER, "din", "--batch-size", "-5"], "--batch-size"),
    ([INFER, "din", "--device", "cuda:x"], "--device 'cuda:x'"),
    ([TRAIN, "din", "--tf32", "yes"], "--tf32 'yes' is not allowed (allowed: on, off, conv, matmul)"),
    ([INFER, "din", "--tf32", "fast"], "--tf32 'fast' is not allowed (allowed: on, off, conv, matmul)"),
    ([TRAIN, "din", "--winograd", "6"], "--winograd '6' is not allowed (allowed: 4, 2, off)"),
    ([INFER, "din", "--winograd", "0"], "--winograd '0' is not allowed (allowed: 4, 2, off)"),
    # Found by the hostile-input probe (issue 26): silent acceptance is an error now.
    ([TRAIN, "din", "--config", "size=tiny", "--config", "size=full"], "--config size is given twice"),
    ([TRAIN, "din", "--steps", "5", "--epochs", "1"], "--steps and --epochs both set the run's length"),
    ([TRAIN, "din", "--seed", "-1"], "--seed '-1' is not an integer in [0, 2^64 - 1]"),
    ([INFER, "din", "--seed", "x"], "--seed 'x'"),
    ([TRAIN, "din", "--kernels", "bogus"], "--kernels: 'bogus'"),
    ([INFER, "din", "--kernels", "nosuchop=cpu.ref"], "unknown op 'nosuchop'"),
    # A variant is checked when the flag is read, not at the op's first call after building.
    ([TRAIN, "din", "--kernels", "matmul=cpu.nope"], "matmul has no variant 'cpu.nope'", "cpu.ref"),
    ([TRAIN, "din", "--kernels", "matmul="], "matmul has no variant ''"),
    ([INFER, "din", "--kernels", "matmul=cpu.ref,matmul=cpu.ref"], "matmul is given twice"),
    ([TRAIN, "din", "--results", "/nonexistent-dir/r.jsonl"], "--results", "/nonexistent-dir does not exist"),
    ([TRAIN, "din", "--save-weights", "/nonexistent-dir/w.safetensors"], "--save-weights"),
    ([TRAIN, "din", "--trace", "/tmp"], "--trace /tmp: is a directory"),
    ([INFER, "din", "--dump-outputs", "/nonexistent-dir/o.safetensors"], "--dump-outputs"),
]
for args, *frags in bad:
    run(args, 2, *frags, "see aim-", "--help")

with tempfile.TemporaryDirectory(prefix="aim_cli_") as tmp:
    ck = os.path.join(tmp, "ck")
    w = os.path.join(tmp, "w.safetensors")
    res = os.path.join(tmp, "train.jsonl")

    # ---- runtime errors: exit 1 naming the file ----------------------------------------------
    run([TRAIN, "din"] + TINY + ["--data", os.path.join(tmp, "nope")], 1, "--data", "nope")
    corrupt = os.path.join(tmp, "corrupt.safetensors")
    with open(corrupt, "wb") as f:
        f.write(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json")
    run([INFER, "din"] + TINY + ["--weights", corrupt, "--iters", "1"], 1, "corrupt.safetensors")
    run([TRAIN, "din"] + TINY + ["--checkpoint-dir", os.path.join(tmp, "none"), "--resume",
                                 "--steps", "5"], 1, "does not exist")

    # ---- the hostile-input probe's runtime cases (issue 26) -----------------------------------
    run([INFER, "din"] + TINY + ["--weights", tmp, "--iters", "1"], 1,
        "--weights " + tmp + ": is a directory")
    out = run([TRAIN, "din"] + TINY + ["--batch-size", "99999999", "--steps", "1"], 1,
              "--batch-size 99999999", "above the host memory limit", "samples fit")
    check("[check:" not in out and ".cpp:" not in out, "internal check text in a user message:\n" + out)
    # Past the CPU allocator's limit the refused allocation says where the run was (phase, layer).
    p = subprocess.run([TRAIN, "resnet50"] + TINY + ["--batch-size", "512", "--steps", "1"],
                       capture_output=True, text=True, timeout=600,
                       env=dict(os.environ, AIM_CPU_MEMORY_LIMIT="50M"))
    check(p.returncode == 1 and "[cpu allocator] a tensor of" in p.stderr and
          "(in fwd, layer" in p.stderr and "above the host memory limit of 50.0 MiB" in p.stderr,
          "allocator limit message:\n" + p.stderr[-1500:])
    # A model too large for memory (the embedding tables of 20000 units) says so while building.
    p = subprocess.run([TRAIN, "nmt", "--device", "cpu", "--config", "units=20000", "--steps", "1"],
                       capture_output=True, text=True, timeout=600,
                       env=dict(os.environ, AIM_CPU_MEMORY_LIMIT="1G"))
    check(p.returncode == 1 and "(in building nmt with --config units=20000 (the other keys" in p.stderr,
          "model-building allocation message:\n" + p.stderr[-1500:])
    run([TRAIN, "din", "--device", "cpu", "--config", "size=tiny", "--steps", "2", "--batch-size",
         "8", "--threads", "1000", "--eval-samples", "16"], 0, "warning: --threads 1000")
    run([TRAIN, "din"] + TINY + ["--kernels", "matmul=cpu.ref", "--steps", "2", "--batch-size",
                                 "8", "--eval-samples", "16"], 0, "done: 2 steps")
    # A diverging run ends with status 3 (its outputs written all the same).
    run([TRAIN, "din"] + TINY + ["--optimizer", "sgd", "--lr", "1e6", "--steps", "60",
                                 "--batch-size", "16", "--eval-samples", "16", "--eval-every", "0"],
        3, "the loss diverged")
    # A final evaluation that fails keeps the trained state (saved first).
    ev_ck, ev_w = os.path.join(tmp, "ev_ck"), os.path.join(tmp, "ev_w.safetensors")
    run([TRAIN, "din"] + TINY + ["--steps", "3", "--batch-size", "8", "--eval-samples", "1",
                                 "--checkpoint-dir", ev_ck, "--save-weights", ev_w], 1)
    check(os.path.exists(os.path.join(ev_ck, "checkpoint.safetensors")) and os.path.exists(ev_w),
          "a failed final evaluation lost the checkpoint or the weights")
    # Resuming: --steps at or below the checkpoint's step, another model, another optimizer.
    run([TRAIN, "din"] + TINY + ["--steps", "3", "--batch-size", "8", "--checkpoint-dir", ev_ck,
                                 "--resume", "--eval-samples", "16"], 1,
        "is at step 3 and this run ends at step 3")
    run([TRAIN, "din"] + TINY + ["--steps", "9", "--batch-size", "8", "--checkpoint-dir", ev_ck,
                                 "--resume", "--optimizer", "sgd"], 1,
        "is a din checkpoint (optimizer adam", "this run is din (optimizer sgd)")
    run([TRAIN, "ncf"] + TINY + ["--steps", "9", "--batch-size", "8", "--checkpoint-dir", ev_ck,
                                 "--resume"], 1, "is a din checkpoint", "this run is ncf")
    # A training checkpoint as --weights gives its model.* weights; another model's weights are
    # named as such.
    run([INFER, "din"] + TINY + ["--weights", os.path.join(ev_ck, "checkpoint.safetensors"),
                                 "--iters", "1", "--batch-size", "8"], 0, "latency p50")
    run([INFER, "ncf"] + TINY + ["--weights", ev_w, "--iters", "1"], 1, "holds din weights")

    # ---- train, checkpoint, resume, save weights ---------------------------------------------
    run([TRAIN, "din"] + TINY + ["--steps", "30", "--batch-size", "32", "--eval-every", "10",
                                 "--checkpoint-dir", ck, "--checkpoint-every", "10",
                                 "--results", res, "--progress", "lines"], 0,
        "step 10/30", "auc", "done: 30 steps")
    check(os.path.exists(os.path.join(ck, "checkpoint.safetensors")), "no checkpoint written")
    # LOCK: the writer's lock file (pid and host), kept; its flock went with the process.
    check(not [f for f in os.listdir(ck) if f not in ("checkpoint.safetensors", "LOCK")],
          "temporary files left in %s: %s" % (ck, os.listdir(ck)))
    run([TRAIN, "din"] + TINY + ["--steps", "40", "--batch-size", "32", "--checkpoint-dir", ck,
                                 "--resume", "--save-weights", w, "--results", res,
                                 "--tf32", "off", "--winograd", "2"], 0,
        "resumed from", "at step 30", "done: 40 steps")
    run([TRAIN, "din"] + TINY + ["--steps", "40", "--batch-size", "16", "--checkpoint-dir", ck,
                                 "--resume"], 1, "batch_size '32' differs from this run's '16'")
    lines = results(res)
    check(len(lines) == 2, "expected 2 results lines, got %d" % len(lines))
    for j in lines:
        for k in ["model", "mode", "device", "precision", "tf32", "batch", "throughput",
                  "throughput_device", "step_time_ms", "metrics", "variants_used", "env",
                  "git_commit", "command"]:
            check(k in j, "results line lacks %r" % k)
    if lines:
        j = lines[-1]
        check(j["mode"] == "train" and j["batch"] == 32 and j["steps_run"] == 10,
              "resumed run's results line: %s" % {k: j.get(k) for k in ("mode", "batch", "steps_run")})
        check(0 < j["metrics"]["auc"] <= 1, "auc out of range")
        check(any(v.startswith("matmul/") for v in j["variants_used"]), "no matmul variant recorded")
        check(j["step_time_ms"]["p50"] <= j["step_time_ms"]["p99"], "p50 > p99")
        check("cpu" in j["env"] and "cuda" in j["env"], "env lacks cpu/cuda")
        # --tf32: PyTorch's default (convolutions only), and what the command line set.
        check([l.get("tf32") for l in lines] == ["conv", "off"],
              "tf32 recorded: %s" % [l.get("tf32") for l in lines])
        check(j["env"].get("tf32") == "off", "env.tf32: %s" % j["env"].get("tf32"))
        # --winograd: F(4x4) by default, what the command line set.
        check([l.get("winograd") for l in lines] == ["4", "2"],
              "winograd recorded: %s" % [l.get("winograd") for l in lines])
        check(j["env"].get("winograd") == 2, "env.winograd: %s" % j["env"].get("winograd"))

    # ---- infer with the trained weights, dump, feed the dump back ------------------------------
    o1, o2 = os.path.join(tmp, "o1.safetensors"), os.path.join(tmp, "o2.safetensors")
    ires = os.path.join(tmp, "infer.jsonl")
    run([INFER, "din"] + TINY + ["--weights", w, "--batch-size", "24", "--iters", "3",
                                 "--warmup", "1", "--dump-outputs", o1, "--results", ires,
                                 "--tf32", "matmul"], 0,
        "latency p50", "wrote outputs")
    run([INFER, "din"] + TINY + ["--weights", w, "--inputs", o1, "--iters", "2",
                                 "--dump-outputs", o2], 0, "latency p50")
    sys.path.insert(0, os.path.join(SOURCE, "tests", "parity"))
    import st  # noqa: E402

    d1, d2 = st.load(o1), st.load(o2)
    check(set(d1) >= {"logits", "output", "input.item", "input.hist_item", "input.mask"},
          "dump lacks tensors: %s" % sorted(d1))
    check(list(d1["logits"].shape) == [24], "dumped logits shape %s" % list(d1["logits"].shape))
    check(float((d1["logits"] - d2["logits"]).abs().max()) == 0.0,
          "re-running the dumped inputs gives other logits")
    j = results(ires)[0]
    check(j["mode"] == "infer" and j["batch"] == 24 and "p99" in j["latency_ms"],
          "infer results line: %s" % j)
    check(j.get("tf32") == "matmul" and j["env"].get("tf32") == "matmul",
          "infer tf32 recorded: %s / %s" % (j.get("tf32"), j["env"].get("tf32")))
    # The wrong shape is named.
    bad_in = os.path.join(tmp, "bad_in.safetensors")
    t = {k[6:]: v for k, v in d1.items() if k.startswith("input.")}
    t["mask"] = t["mask"][:, :1].contiguous()
    st.save(bad_in, t)
    run([INFER, "din"] + TINY + ["--inputs", bad_in, "--iters", "1"], 1, "mask has shape")
    extra_in = os.path.join(tmp, "extra_in.safetensors")
    t = {k[6:]: v for k, v in d1.items() if k.startswith("input.")}
    t["colour"] = t["mask"]
    st.save(extra_in, t)
    run([INFER, "din"] + TINY + ["--inputs", extra_in, "--iters", "1"], 1,
        "tensor 'colour' is not an input of din")
    t = {k[6:]: v.clone() for k, v in d1.items() if k.startswith("input.")}
    t["item"][3] = 99999
    st.save(extra_in, t)
    run([INFER, "din"] + TINY + ["--inputs", extra_in, "--iters", "1"], 1,
        "--inputs " + extra_in, "index 99999", "in tensor 'item' at element 3")

    # ---- profiling: tables and a trace --------------------------------------------------------
    trace = os.path.join(tmp, "t.json")
    run([TRAIN, "din"] + TINY + ["--steps", "6", "--batch-size", "32", "--profile",
                                 "--profile-steps", "2:5", "--trace", trace], 0,
        "profile over 4 steps", "op/variant", "phase/layer", "fwd/att", "bwd/att",
        "model summary", "step (all phases)", "profiler overhead")
    with open(trace) as f:
        tr = json.load(f)["traceEvents"]
    check(sum(1 for e in tr if e["cat"] == "step") == 4, "trace: expected 4 step events")
    check(any(e["cat"] == "op" and e["args"]["variant"] for e in tr), "trace: no op events")
    check(any(e["cat"] == "op" and e["name"].startswith("matmul/") and
              re.search(r"\ba=\[\d+, \d+\] f32 b=\[\d+, \d+\] f32", e["args"].get("shapes", ""))
              for e in tr), "trace: a matmul op without its argument shapes in args.shapes")
    run([TRAIN, "din"] + TINY + ["--profile-steps", "3:2", "--profile"], 2, "--profile-steps")
    svg = os.path.join(tmp, "r.svg")
    run([TRAIN, "din"] + TINY + ["--steps", "4", "--batch-size", "32", "--roofline", svg], 0,
        "wrote roofline")
    import xml.etree.ElementTree as ET
    root = ET.parse(svg).getroot()
    check(root.tag.endswith("svg"), "roofline: not an SVG document")
    check(sum(1 for e in root.iter() if e.tag.endswith("circle")) >= 3, "roofline: too few points")
    check(sum(1 for e in root.iter() if e.tag.endswith("polyline")) >= 1, "roofline: no roofs")
    import shutil
    if shutil.which("rsvg-convert"):  # renders (CI installs librsvg2-bin)
        png = os.path.join(tmp, "r.png")
        p = subprocess.run(["rsvg-convert", "-o", png, svg], capture_output=True, text=True)
        check(p.returncode == 0 and os.path.getsize(png) > 1000, "rsvg-convert failed: " + p.stderr)
    elif os.environ.get("CI"):
        failures.append("CI is set but rsvg-convert (librsvg2-bin) is missing: the SVG is not rendered")

    ceil = os.path.join(tmp, "ceil.json")
    with open(ceil, "w") as f:
        json.dump({"device": "cpu", "fp32_gflops": 400.0, "fp64_gflops": 200.0,
                   "bandwidth_gbs": 50.0}, f)
    run([TRAIN, "din"] + TINY + ["--steps", "3", "--profile", "--ceilings", ceil], 0,
        "roofline: 400 GFLOP/s, 50 GB/s")
    with open(ceil, "w") as f:
        json.dump({"fp32_gflops": 400.0}, f)
    run([TRAIN, "din"] + TINY + ["--steps", "3", "--profile", "--ceilings", ceil], 1,
        "ceil.json", "bandwidth_gbs")

    itrace = os.path.join(tmp, "it.json")
    run([INFER, "din"] + TINY + ["--batch-size", "16", "--iters", "3", "--profile", "--trace",
                                 itrace, "--roofline", os.path.join(tmp, "ir.svg")], 0,
        "profile over 3 steps", "fwd/att", "model summary", "wrote trace", "wrote roofline")
    with open(itrace) as f:
        check(sum(1 for e in json.load(f)["traceEvents"] if e["cat"] == "step") == 3,
              "infer trace: expected 3 steps")

    # ---- a batch-size sweep: one line per size -------------------------------------------------
    sweep = os.path.join(tmp, "sweep.jsonl")
    run([INFER, "din"] + TINY + ["--batch-size", "8,16", "--iters", "2", "--results", sweep], 0)
    check([j["batch"] for j in results(sweep)] == [8, 16], "sweep results lines")

    # ---- the DIN export of a (fake) dataset.pkl ------------------------------------------------
    pkl, exp = os.path.join(tmp, "dataset.pkl"), os.path.join(tmp, "export")
    py = sys.executable
    subprocess.run([py, os.path.join(SOURCE, "tests", "data", "make_fake_din_pickle.py"), pkl],
                   check=True)
    subprocess.run([py, os.path.join(SOURCE, "tools", "din_pickle_export.py"), pkl, exp],
                   check=True, capture_output=True)
    run([TRAIN, "din"] + TINY + ["--data", exp, "--epochs", "2", "--batch-size", "8",
                                 "--progress", "lines"], 0, "din-export", "auc", "gauc",
        "done: 10 steps")

    # ---- DIEN on the reference's file layout (pickled vocabularies converted once) ------------
    dd = os.path.join(tmp, "dien")
    subprocess.run([py, os.path.join(SOURCE, "tests", "data", "make_fake_dien_dir.py"), dd,
                    "--train-pairs", "3000", "--test-pairs", "300"], check=True)
    subprocess.run([py, os.path.join(SOURCE, "tools", "dien_vocab_from_pkl.py"), dd], check=True,
                   capture_output=True)
    dres = os.path.join(tmp, "dien.jsonl")
    run([TRAIN, "dien"] + TINY + ["--data", dd, "--steps", "400", "--batch-size", "32", "--lr",
                                  "0.005", "--eval-every", "400", "--results", dres],
        0, "dien-files", "6000 train, 600 test samples", "5 no-clicks per position")
    if os.path.exists(dres):
        auc = results(dres)[-1]["metrics"]["auc"]
        # Attainable about 0.875 (docs/dien-data.md); 400 steps reach ~0.72.
        check(auc > 0.65, "dien on files: auc %.3f, expected > 0.65" % auc)
    os.remove(os.path.join(dd, "reviews-info"))
    run([TRAIN, "dien"] + TINY + ["--data", dd, "--steps", "1"], 1, dd + "/reviews-info:0: cannot open")

    # ---- precision: mixed-precision training, low-precision inference (docs/precision.md) ------
    pres = os.path.join(tmp, "precision.jsonl")
    run([TRAIN, "din"] + TINY + ["--precision", "fp16", "--steps", "4", "--batch-size", "16",
                                 "--inject-overflow", "2", "--results", pres], 0,
        "precision fp16 (mixed)", "step 2: gradient overflow (Inf/NaN), step skipped; loss scale -> 32768",
        "loss scale 32768 at the end, 1 steps skipped")
    run([TRAIN, "din", "--list-amp"], 0, "lowp    matmul, linear", "^(item|cate)_emb\\.")
    qf = os.path.join(tmp, "q.safetensors")
    run([INFER, "din"] + TINY + ["--int8", "--iters", "2", "--batch-size", "32", "--save-quantized",
                                 qf, "--results", pres], 0, "int8 vs fp32, output output",
        "(delta ", "wrote int8 weights and scales")
    run([INFER, "din"] + TINY + ["--precision", "int8", "--load-quantized", qf, "--iters", "1",
                                 "--batch-size", "32"], 0, "loaded from " + qf)
    run([INFER, "din"] + TINY + ["--bf16", "--iters", "1", "--batch-size", "32", "--results", pres],
        0, "bf16 vs fp32, output output")
    if os.path.exists(pres):
        lines = results(pres)
        check([l["precision"] for l in lines] == ["fp16", "int8", "bf16"],
              "precision results: %r" % [l.get("precision") for l in lines])
        check(lines[0].get("skipped_steps") == 1 and lines[0].get("loss_scale") == 32768,
              "fp16 results lack loss_scale/skipped_steps")
        check(lines[1]["vs_fp32"]["outputs"]["output"]["cosine"] > 0.99, "int8 cosine in results")
    run([INFER, "crnn"] + TINY + ["--fp16", "--iters", "1", "--warmup", "0", "--batch-size", "8",
                                  "--compare-samples", "0"], 0,
        "fp16 vs fp32, output decoded: ", "samples identical")
    run([INFER, "din"] + TINY + ["--int8", "--load-quantized", os.path.join(tmp, "nope.safetensors"),
                                 "--iters", "1"], 1, "nope.safetensors")
    # Batch norms folded into their convolutions (layers/fold.h): on by default, checked against
    # the unfolded outputs; int8 weights saved with folding cannot be used without it.
    qc = os.path.join(tmp, "q_crnn.safetensors")
    run([INFER, "crnn"] + TINY + ["--int8", "--iters", "1", "--warmup", "0", "--batch-size", "8",
                                  "--compare-samples", "0", "--calib-batches", "1",
                                  "--save-quantized", qc], 0,
        "folded 7 batch norms into the convolutions before them (--no-fold keeps them)")
    run([INFER, "crnn"] + TINY + ["--int8", "--load-quantized", qc, "--no-fold", "--iters", "1",
                                  "--warmup", "0", "--batch-size", "8"], 1,
        "written with 7 batch norms folded into their convolutions, this run folds 0 (drop --no-fold")
    out = run([INFER, "crnn"] + TINY + ["--no-fold", "--iters", "1", "--warmup", "0",
                                        "--batch-size", "8"], 0)
    check("folded" not in out, "--no-fold still folded: " + out[-500:])

    # ---- a CNN classifier: torchvision's weights, aim-infer's dump vs torchvision's logits --------
    vis = os.path.join(tmp, "vision")
    os.makedirs(vis)
    p = subprocess.run([sys.executable, os.path.join(SOURCE, "tests", "peers", "vision.py"),
                        "resnet50", "--out-dir", vis, "--image", "64", "--batch", "2"],
                       capture_output=True, text=True)
    if p.returncode != 0:
        failures.append("tests/peers/vision.py resnet50 failed (python3-torchvision?):\n" + p.stderr[-2000:])
    else:
        import torch
        b = st.load(os.path.join(vis, "batch.safetensors"))
        vin, vout = os.path.join(vis, "in.safetensors"), os.path.join(vis, "dump.safetensors")
        st.save(vin, {"input": b["input"]})
        run([INFER, "resnet50", "--device", "cpu", "--config", "image=64", "--threads", "2",
             "--weights", os.path.join(vis, "weights.safetensors"), "--inputs", vin, "--iters", "1",
             "--warmup", "0", "--dump-outputs", vout], 0, "latency p50")
        if os.path.exists(vout):
            got = st.load(vout)["logits"]
            want = st.load(os.path.join(vis, "out.safetensors"))["logits_eval"]
            rel = float((got - want).abs().max() / want.abs().max())
            check(got.shape == want.shape and rel < 1e-3,
                  "resnet50 logits vs torchvision: relative difference %.3g" % rel)
        run([INFER, "resnet50", "--device", "cpu", "--config", "image=64", "--threads", "2",
             "--weights", os.path.join(vis, "weights.safetensors"), "--config", "classes=10",
             "--iters", "1"], 1, "fc.weight")
    run([TRAIN, "resnet50"] + TINY + ["--steps", "3", "--batch-size", "4", "--eval-samples", "8",
                                      "--progress", "lines"], 0, "done: 3 steps", "top1")

# ---- data-parallel training: CPU ranks (local backend), results, trace overlap, failures --------
with tempfile.TemporaryDirectory() as dtmp:
    import time
    dres = os.path.join(dtmp, "dp.jsonl")
    dtrace = os.path.join(dtmp, "dp_trace.json")
    run([TRAIN, "din"] + TINY + ["--ranks", "2", "--steps", "6", "--batch-size", "32",
                                  "--eval-every", "0", "--eval-samples", "500", "--bucket-mb", "0.002",
                                  "--trace", dtrace, "--results", dres, "--progress", "lines"],
        0, "data parallel: 2 ranks (local", "rank 1: ", "hidden behind backward", "global batch 64")
    if os.path.exists(dres):
        j = results(dres)[-1]
        d = j.get("dist", {})
        check(j["devices"] == 2 and j["global_batch"] == 64, "dp results: devices/global_batch %r" % j)
        check(len(d.get("rank_throughput", [])) == 2 and d["total_throughput"] > 0 and d["buckets"] > 1
              and len(d["bucket_bytes"]) == d["buckets"] and 0 <= d["hidden_fraction"] <= 1
              and d["allreduce_ms_per_step"] > 0 and d["backward_ms_per_step"] > 0,
              "dp results: dist fields %r" % d)
    if os.path.exists(dtrace):
        with open(dtrace) as f:
            ev = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
        bwd = [(e["ts"], e["ts"] + e["dur"]) for e in ev if e["name"] == "bwd"]
        ar = [(e["ts"], e["tid"]) for e in ev if e["name"].startswith("allreduce bucket ")]
        check(ar and not {t for _, t in ar} & {e["tid"] for e in ev if e["name"] == "bwd"},
              "dp trace: all-reduce spans must be on their own tracks")
        check(any(a < s < b for s, _ in ar for a, b in bwd),
              "dp trace: no all-reduce span starts inside a backward span")
    # A failing rank stops every rank at once with its message (not at the 60 s deadline).
    t0 = time.time()
    run([TRAIN, "din"] + TINY + ["--ranks", "3", "--steps", "20", "--batch-size", "16",
                                  "--eval-every", "0", "--eval-samples", "100", "--dist-timeout", "60",
                                  "--inject-failure", "2:4"],
        1, "dist: rank 2 failed: injected failure at step 4")
    check(time.time() - t0 < 30, "dp failure: took %.0f s, expected well under --dist-timeout 60"
          % (time.time() - t0))
    # A rank that stops answering (outside any collective): its peers time out after 2 s, the
    # process ends a grace of min(10 s, 2 s) later naming it, the stuck thread abandoned.
    t0 = time.time()
    run([TRAIN, "din"] + TINY + ["--ranks", "3", "--steps", "20", "--batch-size", "16",
                                  "--eval-every", "0", "--eval-samples", "100", "--dist-timeout", "2",
                                  "--inject-failure", "2:3:hang"],
        1, "timed out after 2000 ms", "waiting for rank(s) 2", "rank(s) 2 still running 2000 ms later")
    check(time.time() - t0 < 15, "dp hang: took %.0f s, expected about --dist-timeout 2 + 2 s"
          % (time.time() - t0))
    # Checkpoints: rank 0 writes; resuming with another rank count is refused.
    dck = os.path.join(dtmp, "ck")
    run([TRAIN, "din"] + TINY + ["--ranks", "2", "--steps", "3", "--batch-size", "16",
                                  "--eval-samples", "100", "--checkpoint-dir", dck], 0, "done: 3 steps")
    run([TRAIN, "din"] + TINY + ["--steps", "6", "--batch-size", "16", "--eval-samples", "100",
                                  "--checkpoint-dir", dck, "--resume"], 1, "written by a run of 2 rank(s)")
    run([TRAIN, "din"] + TINY + ["--ranks", "2", "--steps", "2", "--batch-size", "16",
                                  "--eval-samples", "100", "--embedding-comm", "sparse"],
        0, "sparse exchange of item_emb.weight")
    run([TRAIN, "din"] + TINY + ["--ranks", "2", "--steps", "2", "--batch-size", "16",
                                  "--eval-samples", "100", "--precision", "fp16", "--inject-overflow", "1"],
        0, "step 1: gradient overflow", "1 steps skipped")
    run([TRAIN, "din", "--config", "size=tiny", "--dist-plan", "--batch-size", "64"], 0,
        '"bucket_bytes"', '"grad_bytes"', '"rows_touched"')
    for args, *frags in [
        (["--ranks", "2", "--device", "cuda"], "--ranks runs CPU ranks"),
        (["--ranks", "2", "--gpus", "2"], "--ranks (CPU ranks) and --gpus exclude each other"),
        (["--ranks", "2", "--inject-failure", "5:1"], "--inject-failure rank 5 is not a rank of 2"),
        (["--ranks", "2", "--inject-failure", "x"], "--inject-failure 'x': expected RANK:STEP"),
        (["--inject-failure", "0:1"], "--inject-failure needs a data-parallel run"),
        (["--ranks", "2", "--embedding-comm", "rows"], "--embedding-comm 'rows'", "allowed: dense, sparse"),
        (["--ranks", "2", "--dist-timeout", "0"], "--dist-timeout must be > 0"),
        (["--ranks", "2", "--bucket-mb", "-1"], "--bucket-mb must be > 0"),
        (["--ranks", "-1"], "--ranks must be >= 0"),
    ]:
        run([TRAIN, "din", "--config", "size=tiny", "--steps", "1"] + args, 2, *frags)
    run([TRAIN, "din"] + TINY + ["--ranks", "2", "--steps", "1", "--freeze-bn"], 1,
        "--freeze-bn: din has no batch-normalisation layer")

# ---- data-parallel training under mpirun: the mpi backend (one CPU process per rank) ----------
# Runs when the build has MPI (the CMake cache names mpiexec and aim-train accepts the mpi
# backend); a build without MPI prints that the section was skipped. CI installs OpenMPI
# (tools/deps.sh), so there it runs.
def cache_value(key):
    try:
        with open(os.path.join(BUILD, "CMakeCache.txt")) as f:
            for line in f:
                if line.startswith(key + ":"):
                    return line.split("=", 1)[1].strip()
    except OSError:
        pass
    return ""


mpiexec = cache_value("MPIEXEC_EXECUTABLE")
if not mpiexec or mpiexec.endswith("-NOTFOUND") or not os.path.exists(mpiexec):
    print("skipped the mpi section: this build found no MPI (install libopenmpi-dev openmpi-bin: "
          "tools/deps.sh)")
else:
    # As root (containers) OpenMPI wants both variables; elsewhere they are ignored.
    os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
    os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    # Under ASan (tools/sanitize.sh) OpenMPI's allocations outlive MPI_Finalize and its libraries
    # keep no frame pointers, so LeakSanitizer can neither name nor suppress them: no leak check
    # for the mpi runs (the last section). ASan's other checks stay on.
    if "ASAN_OPTIONS" in os.environ:
        os.environ["ASAN_OPTIONS"] += ":detect_leaks=0"
    mpirun = [mpiexec, "-n", "2", "--oversubscribe", "--bind-to", "none"]
    probe = subprocess.run([mpiexec, "-n", "1", TRAIN, "din"] + TINY +
                           ["--dist-backend", "mpi", "--steps", "1", "--batch-size", "8",
                            "--eval-samples", "16"], capture_output=True, text=True, timeout=300)
    if probe.returncode == 2 and "built without MPI" in probe.stderr:
        print("skipped the mpi section: aim-train was built without MPI")
    else:
        check(probe.returncode == 0 and "data parallel: 1 ranks (mpi" in probe.stdout,
              "mpi: mpiexec -n 1 aim-train --dist-backend mpi: exit %d\n%s" %
              (probe.returncode, (probe.stdout + probe.stderr)[-2000:]))
        with tempfile.TemporaryDirectory() as mtmp:
            import time
            mres = os.path.join(mtmp, "mpi.jsonl")
            common = ["--steps", "5", "--eval-every", "0", "--eval-samples", "100",
                      "--optimizer", "sgd", "--lr", "0.1", "--momentum", "0.9", "--seed", "3"]
            out = run(mpirun + [TRAIN, "din"] + TINY + common +
                      ["--batch-size", "16", "--bucket-mb", "0.005", "--progress", "lines",
                       "--save-weights", os.path.join(mtmp, "two.safetensors"),
                       "--checkpoint-dir", os.path.join(mtmp, "ck2"), "--results", mres],
                      0, "data parallel: 2 ranks (mpi, processes on the CPU)", "global batch 32",
                      "rank 1: ", "hidden behind backward", where="mpirun -n 2 aim-train din")
            check(out.count("aim-train din (") == 1, "mpi: only rank 0 prints the run's log")
            run([TRAIN, "din"] + TINY + common +
                ["--batch-size", "32", "--save-weights", os.path.join(mtmp, "one.safetensors"),
                 "--checkpoint-dir", os.path.join(mtmp, "ck1")], 0, "done: 5 steps")
            files = [os.path.join(mtmp, f) for f in
                     ("one.safetensors", "two.safetensors", "ck1/checkpoint.safetensors",
                      "ck2/checkpoint.safetensors")]
            if all(os.path.exists(f) for f in files):
                one, two, ck1, ck2 = (st.load(f) for f in files)
                worst = max(float((one[k].double() - two[k].double()).abs().max())
                            for k in one if one[k].is_floating_point())
                check(set(one) == set(two) and worst < 1e-5,
                      "mpi: 2 ranks at batch 16 vs 1 process at 32: weights differ by %.3g" % worst)
                model = [k for k in ck1 if k.startswith("model.") and ck1[k].is_floating_point()]
                worst = max(float((ck1[k].double() - ck2[k].double()).abs().max()) for k in model)
                check(model and worst < 1e-5,
                      "mpi: checkpoints (model.*) differ by %.3g" % worst)
            else:
                failures.append("mpi: missing outputs %s" % [f for f in files if not os.path.exists(f)])
            if os.path.exists(mres):
                j = results(mres)[-1]
                check(j["devices"] == 2 and j["global_batch"] == 32 and j["dist"]["backend"] == "mpi"
                      and len(j["dist"]["rank_throughput"]) == 2,
                      "mpi results: %r" % {k: j.get(k) for k in ("devices", "global_batch", "dist")})
            # A failing rank prints its error and ends the job (MPI_Abort) at once, not at the
            # 60 s deadline; a rank that stops answering ends it at its peer's 2 s deadline.
            t0 = time.time()
            run(mpirun + [TRAIN, "din"] + TINY +
                ["--steps", "20", "--batch-size", "16", "--eval-every", "0", "--eval-samples", "100",
                 "--dist-timeout", "60", "--inject-failure", "1:3"],
                1, "dist: rank 1 failed: injected failure at step 3", "MPI_Abort",
                where="mpirun -n 2 aim-train --inject-failure 1:3")
            check(time.time() - t0 < 30, "mpi failure: took %.0f s, expected well under "
                  "--dist-timeout 60" % (time.time() - t0))
            t0 = time.time()
            run(mpirun + [TRAIN, "din"] + TINY +
                ["--steps", "20", "--batch-size", "16", "--eval-every", "0", "--eval-samples", "100",
                 "--dist-timeout", "2", "--inject-failure", "1:3:hang"],
                1, "dist: rank 0 timed out after 2000 ms in all_reduce", "MPI_Abort",
                where="mpirun -n 2 aim-train --inject-failure 1:3:hang")
            check(time.time() - t0 < 20, "mpi hang: took %.0f s, expected about --dist-timeout 2"
                  % (time.time() - t0))
            # SyncBatchNorm across MPI processes: DIN bn=train (BatchNorm1d with batch statistics)
            # on 2 ranks at 16 equals one process at 32.
            syn = ["--config", "bn=train", "--steps", "5", "--eval-every", "0", "--eval-samples",
                   "100", "--optimizer", "sgd", "--lr", "0.1", "--momentum", "0.9"]
            run(mpirun + [TRAIN, "din"] + TINY + syn +
                ["--batch-size", "16", "--sync-bn", "--save-weights",
                 os.path.join(mtmp, "sync2.safetensors")],
                0, "SyncBatchNorm: batch statistics synchronised over the 2 ranks",
                where="mpirun -n 2 aim-train din --config bn=train --sync-bn")
            run([TRAIN, "din"] + TINY + syn +
                ["--batch-size", "32", "--save-weights", os.path.join(mtmp, "sync1.safetensors")],
                0, "done: 5 steps")
            files = [os.path.join(mtmp, f) for f in ("sync1.safetensors", "sync2.safetensors")]
            if all(os.path.exists(f) for f in files):
                one, two = (st.load(f) for f in files)
                worst = max(float((one[k].double() - two[k].double()).abs().max())
                            for k in one if one[k].is_floating_point())
                check(worst < 1e-5, "mpi --sync-bn: 2 ranks at 16 vs 1 process at 32 differ by %.3g"
                      % worst)
            # The backend flag: explicit choices that cannot run are usage errors.
            for args, frag in [
                (["--dist-backend", "nccl"], "--dist-backend nccl runs GPU ranks, got --device cpu"),
                (["--dist-backend", "local"], "--dist-backend local runs ranks as threads"),
                (["--ranks", "2"], "--ranks/--gpus start ranks in this process"),
            ]:
                run(mpirun + [TRAIN, "din"] + TINY + ["--steps", "1"] + args, 2, frag,
                    where="mpirun aim-train " + " ".join(args))
    # SyncBatchNorm on CPU ranks (threads): the log says the statistics are synchronised; without a
    # data-parallel run the flag is a usage error, and a model without batch statistics says so.
    run([TRAIN, "din"] + TINY + ["--config", "bn=train", "--ranks", "2", "--steps", "2",
                                  "--batch-size", "16", "--eval-samples", "100", "--sync-bn"],
        0, "SyncBatchNorm: batch statistics synchronised over the 2 ranks (the global batch of 32) "
        "in hist_bn (BatchNorm1d) b1 (BatchNorm1d)")
    run([TRAIN, "din"] + TINY + ["--config", "bn=train", "--ranks", "2", "--steps", "1",
                                  "--batch-size", "16", "--eval-samples", "100"],
        0, "note: batch statistics are per rank (16 samples, not 32; --sync-bn synchronises them)")
    run([TRAIN, "din"] + TINY + ["--ranks", "2", "--steps", "1", "--sync-bn"], 1,
        "--sync-bn: din (act=sigmoid,att=fold,bn=affine,size=tiny) has no layer that normalises "
        "with batch statistics")
    for args, frag in [
        (["--sync-bn"], "--sync-bn synchronises batch statistics over data-parallel ranks: it needs "
         "--ranks, --gpus or a launcher"),
        (["--dist-backend", "mpi"], "--dist-backend mpi runs one rank per process under mpirun"),
        (["--dist-backend", "ring"], "--dist-backend 'ring' is not allowed (allowed: auto, local, mpi, nccl)"),
        (["--ranks", "2", "--dist-backend", "mpi"], "--dist-backend mpi does not run --ranks"),
    ]:
        run([TRAIN, "din", "--config", "size=tiny", "--steps", "1"] + args, 2, frag)

if failures:
    print("%d CLI checks failed:\n\n%s" % (len(failures), "\n\n".join(failures)))
    sys.exit(1)
print("all CLI checks passed")
