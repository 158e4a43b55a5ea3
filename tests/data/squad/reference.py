#!/usr/bin/env python3
"""The reference for aim's SQuAD reader, features and evaluation (data/squad.h), written out from
google-research/bert's run_squad.py (read_squad_examples, convert_examples_to_features,
_improve_answer_span, _check_is_max_context) and SQuAD's evaluate-v1.1.py, over the tokenizer
reference of tests/data/wordpiece/reference.py. Writes expected.json from sample.json,
predictions.json and ../wordpiece/vocab.txt; `--check` fails when expected.json differs."""
import collections
import json
import os
import re
import string
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "wordpiece"))
import reference as wp  # noqa: E402

# Small windows so that documents split into several, with the reference's arithmetic.
OPTIONS = {"max_seq_length": 24, "doc_stride": 6, "max_query_length": 8}


def squad_space(c):
    return c in " \t\r\n" or ord(c) == 0x202F


def read(data, training):
    out, skipped = [], 0
    for article in data["data"]:
        for para in article["paragraphs"]:
            doc, char_word, prev = [], [], True
            for c in para["context"]:
                if squad_space(c):
                    prev = True
                else:
                    if prev:
                        doc.append(c)
                    else:
                        doc[-1] += c
                    prev = False
                char_word.append(len(doc) - 1)
            for qa in para["qas"]:
                e = {"id": qa["id"], "question": qa["question"], "doc": doc,
                     "answers": [a["text"] for a in qa["answers"]], "start": -1, "end": -1}
                if training:
                    a = qa["answers"][0]
                    e["start"] = char_word[a["answer_start"]]
                    e["end"] = char_word[a["answer_start"] + len(a["text"]) - 1]
                    actual = " ".join(doc[e["start"]:e["end"] + 1])
                    if actual.find(" ".join(a["text"].strip().split())) == -1:
                        skipped += 1
                        continue
                out.append(e)
    return out, skipped


def tokenize(text, vocab):
    return [p for w in wp.basic_tokenize(text, True) for p in wp.wordpiece(w, vocab)]


def features(examples, vocab, training):
    out, uid = [], 1000000000
    for ei, e in enumerate(examples):
        query = tokenize(e["question"], vocab)[:OPTIONS["max_query_length"]]
        tok_to_orig, orig_to_tok, doc = [], [], []
        for i, w in enumerate(e["doc"]):
            orig_to_tok.append(len(doc))
            for t in tokenize(w, vocab):
                tok_to_orig.append(i)
                doc.append(t)
        ts = te = None
        if training:
            ts = orig_to_tok[e["start"]]
            te = orig_to_tok[e["end"] + 1] - 1 if e["end"] < len(e["doc"]) - 1 else len(doc) - 1
            want = " ".join(tokenize(e["answers"][0], vocab))
            done = False
            for s in range(ts, te + 1):
                for t in range(te, s - 1, -1):
                    if " ".join(doc[s:t + 1]) == want:
                        ts, te, done = s, t, True
                        break
                if done:
                    break
        max_doc = OPTIONS["max_seq_length"] - len(query) - 3
        spans, start = [], 0
        while start < len(doc):
            length = min(len(doc) - start, max_doc)
            spans.append((start, length))
            if start + length == len(doc):
                break
            start += min(length, OPTIONS["doc_stride"])
        for si, (s0, n) in enumerate(spans):
            tokens = ["[CLS]"] + query + ["[SEP]"]
            seg = [0] * len(tokens)
            to_orig, max_ctx = {}, {}
            for i in range(n):
                split = s0 + i
                best, best_i = None, None
                for k, (a, m) in enumerate(spans):
                    end = a + m - 1
                    if split < a or split > end:
                        continue
                    score = min(split - a, end - split) + 0.01 * m
                    if best is None or score > best:
                        best, best_i = score, k
                to_orig[len(tokens)] = tok_to_orig[split]
                max_ctx[len(tokens)] = best_i == si
                tokens.append(doc[split])
                seg.append(1)
            tokens.append("[SEP]")
            seg.append(1)
            ids = [vocab[t] for t in tokens]
            pad = OPTIONS["max_seq_length"] - len(ids)
            sp = ep = 0
            if training and ts >= s0 and te <= s0 + n - 1:
                sp, ep = ts - s0 + len(query) + 2, te - s0 + len(query) + 2
            out.append({"unique_id": uid, "example_index": ei, "doc_span_index": si,
                        "tokens": tokens, "token_to_orig": {str(k): v for k, v in to_orig.items()},
                        "token_is_max_context": {str(k): v for k, v in max_ctx.items()},
                        "input_ids": ids + [0] * pad, "input_mask": [1] * len(ids) + [0] * pad,
                        "segment_ids": seg + [0] * pad, "start_position": sp,
                        "end_position": ep})
            uid += 1
    return out


def normalize_answer(s):
    s = s.lower()
    s = "".join(ch for ch in s if ch not in set(string.punctuation))
    s = re.sub(r"\b(a|an|the)\b", " ", s)
    return " ".join(s.split())


def f1(p, g):
    pt, gt = normalize_answer(p).split(), normalize_answer(g).split()
    same = sum((collections.Counter(pt) & collections.Counter(gt)).values())
    if same == 0:
        return 0
    prec, rec = same / len(pt), same / len(gt)
    return 2 * prec * rec / (prec + rec)


def evaluate(examples, predictions):
    em = f = 0.0
    for e in examples:
        if e["id"] not in predictions:
            continue
        p = predictions[e["id"]]
        em += max(float(normalize_answer(p) == normalize_answer(g)) for g in e["answers"])
        f += max(f1(p, g) for g in e["answers"])
    n = len(examples)
    return {"exact_match": 100.0 * em / n, "f1": 100.0 * f / n}


def expected():
    vocab = wp.load_vocab(os.path.join(HERE, "..", "wordpiece", "vocab.txt"))
    with open(os.path.join(HERE, "sample.json"), encoding="utf-8") as fh:
        data = json.load(fh)
    with open(os.path.join(HERE, "predictions.json"), encoding="utf-8") as fh:
        predictions = json.load(fh)
    train, skipped = read(data, True)
    evals, _ = read(data, False)
    return {"options": OPTIONS, "train_skipped": skipped,
            "train_ids": [e["id"] for e in train],
            "train_words": [[e["start"], e["end"]] for e in train],
            "train_features": features(train, vocab, True),
            "eval_features": features(evals, vocab, False),
            "normalized": {p: normalize_answer(p) for p in predictions.values()},
            "score": evaluate(evals, predictions)}


def main():
    out = json.dumps(expected(), indent=1, ensure_ascii=False, sort_keys=True) + "\n"
    path = os.path.join(HERE, "expected.json")
    if "--check" in sys.argv:
        with open(path, encoding="utf-8") as fh:
            if fh.read() != out:
                sys.exit(f"{path} differs from the reference's output")
        print("expected.json matches")
        return
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(out)


if __name__ == "__main__":
    main()
