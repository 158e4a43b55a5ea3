#!/usr/bin/env python3
"""Writes a folder in ICDAR 2015 Challenge 4's layout (docs/seglink.md, data/icdar_source.h) with
stand-in "words", for `aim-train seglink --data icdar:DIR` where the real images are not at hand:

  ch4_training_images/img_N.jpg, ch4_training_localization_transcription_gt/gt_img_N.txt
  ch4_test_images/img_N.jpg,     Challenge4_Test_Task1_GT/gt_img_N.txt

Each image is 1280 x 720 (ICDAR 2015's size), flat grey, with 1-6 filled rectangles (black or
white, 60-300 x 16-60 px, rotated within +-30 degrees); each rectangle is a ground-truth line
(corners clockwise from the top left, rounded to integers, as the official files), a fifth of them
"###". Files start with a byte order mark and end lines with CRLF, as the official ones. Needs PIL.

Usage: make_fake_icdar_dir.py DIR [--train 100] [--test 20] [--seed 0]
"""
import argparse
import math
import os
import random

from PIL import Image, ImageDraw

ap = argparse.ArgumentParser()
ap.add_argument("dir")
ap.add_argument("--train", type=int, default=100)
ap.add_argument("--test", type=int, default=20)
ap.add_argument("--seed", type=int, default=0)
a = ap.parse_args()
rng = random.Random(a.seed)


def make(image_dir, gt_dir, n):
    os.makedirs(os.path.join(a.dir, image_dir), exist_ok=True)
    os.makedirs(os.path.join(a.dir, gt_dir), exist_ok=True)
    for i in range(1, n + 1):
        im = Image.new("RGB", (1280, 720), (rng.randint(60, 200),) * 3)
        draw = ImageDraw.Draw(im)
        lines = []
        for k in range(rng.randint(1, 6)):
            w, h = rng.randint(60, 300), rng.randint(16, 60)
            cx, cy = rng.randint(200, 1080), rng.randint(100, 620)
            t = math.radians(rng.uniform(-30, 30))
            c, s = math.cos(t), math.sin(t)
            pts = [(cx + dx * c - dy * s, cy + dx * s + dy * c)
                   for dx, dy in [(-w / 2, -h / 2), (w / 2, -h / 2), (w / 2, h / 2), (-w / 2, h / 2)]]
            draw.polygon(pts, fill=(255, 255, 255) if k % 2 else (0, 0, 0))
            text = "###" if rng.random() < 0.2 else "WORD%d" % k
            lines.append(",".join(str(int(round(v))) for p in pts for v in p) + "," + text)
        im.save(os.path.join(a.dir, image_dir, "img_%d.jpg" % i), quality=90)
        with open(os.path.join(a.dir, gt_dir, "gt_img_%d.txt" % i), "w", encoding="utf-8-sig",
                  newline="\r\n") as f:
            f.write("\n".join(lines) + "\n")


make("ch4_training_images", "ch4_training_localization_transcription_gt", a.train)
make("ch4_test_images", "Challenge4_Test_Task1_GT", a.test)
print("wrote %d training and %d test images under %s" % (a.train, a.test, a.dir))
