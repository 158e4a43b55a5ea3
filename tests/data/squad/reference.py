#!/usr/bin/env python3
"""The reference for aim's SQuAD reader, features, answer extraction and evaluation (data/squad.h),
written out from the description of google-research/bert's run_squad.py (read_squad_examples,
convert_examples_to_features, _improve_answer_span, _check_is_max_context; write_predictions with
_get_best_indexes and get_final_text) and SQuAD's evaluate-v1.1.py, over the tokenizer reference
of tests/data/wordpiece/reference.py. Writes expected.json from sample.json, predictions.json and
../wordpiece/vocab.txt (plus fixed logits it makes for the evaluation windows, and get_final_text
cases); `--check` fails when expected.json differs."""
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
# write_predictions' defaults (run_squad.py flags n_best_size, max_answer_length).
PREDICT = {"n_best_size": 20, "max_answer_length": 30}


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
                        "tokens": tokens, "token_to_orig": to_orig,
                        "token_is_max_context": max_ctx,
                        "input_ids": ids + [0] * pad, "input_mask": [1] * len(ids) + [0] * pad,
                        "segment_ids": seg + [0] * pad, "start_position": sp,
                        "end_position": ep})
            uid += 1
    return out


def json_feature(f):
    """A feature as expected.json holds it (JSON object keys are strings)."""
    g = dict(f)
    g["token_to_orig"] = {str(k): v for k, v in f["token_to_orig"].items()}
    g["token_is_max_context"] = {str(k): v for k, v in f["token_is_max_context"].items()}
    return g


def final_text(pred_text, orig_text):
    """get_final_text with do_lower_case: find the prediction (text of WordPiece tokens) in the
    basic tokens of the original words, then carry its first and last character back to the
    original text through the alignment of the two texts without their spaces. Any failure (not
    found, texts of different lengths without spaces, an end that does not map) gives the whole
    original text."""
    tok_text = " ".join(wp.basic_tokenize(orig_text, True))
    first = tok_text.find(pred_text)
    if first < 0:
        return orig_text
    last = first + len(pred_text) - 1

    def non_space(text):  # position in the text without spaces -> position in the text
        return [i for i, c in enumerate(text) if c != " "]

    orig_pos, tok_pos = non_space(orig_text), non_space(tok_text)
    if len(orig_pos) != len(tok_pos):
        return orig_text
    tok_rank = {p: k for k, p in enumerate(tok_pos)}
    if first not in tok_rank or last not in tok_rank:
        return orig_text
    return orig_text[orig_pos[tok_rank[first]]:orig_pos[tok_rank[last]] + 1]


def best_indexes(logits, n):
    """The n highest logits' positions; equal logits in position order (a stable sort)."""
    return sorted(range(len(logits)), key=lambda i: logits[i], reverse=True)[:n]


def nbest(example, feats, logits):
    """write_predictions for one example (SQuAD v1.1: no null answer): candidate (start, end)
    pairs from the best starts x best ends of each window, kept when both are document tokens of
    the window, the start has its maximal context there, end >= start and the span has at most
    max_answer_length tokens; by start + end logit (stable), texts deduplicated, n_best_size
    of them; "empty" when none."""
    n = PREDICT["n_best_size"]
    prelim = []
    for f in feats:
        st, en = logits[f["unique_id"]]
        for s in best_indexes(st, n):
            for e in best_indexes(en, n):
                if s >= len(f["tokens"]) or e >= len(f["tokens"]):
                    continue
                if s not in f["token_to_orig"] or e not in f["token_to_orig"]:
                    continue
                if not f["token_is_max_context"].get(s, False):
                    continue
                if e < s or e - s + 1 > PREDICT["max_answer_length"]:
                    continue
                prelim.append((st[s] + en[e], f, s, e))
    prelim.sort(key=lambda p: p[0], reverse=True)
    out, seen = [], set()
    for _, f, s, e in prelim:
        st, en = logits[f["unique_id"]]
        if len(out) >= n:
            break
        pieces = " ".join(f["tokens"][s:e + 1]).replace(" ##", "").replace("##", "")
        pieces = " ".join(pieces.strip().split())
        words = example["doc"][f["token_to_orig"][s]:f["token_to_orig"][e] + 1]
        text = final_text(pieces, " ".join(words))
        if text in seen:
            continue
        seen.add(text)
        out.append([text, st[s], en[e]])
    return out or [["empty", 0.0, 0.0]]


def window_logits(feats):
    """Fixed logits for every evaluation window: quarter steps (exact in float32) with many equal
    values, so the order of equal candidates is tested too."""
    out = {}
    for f in feats:
        u, T = f["unique_id"], OPTIONS["max_seq_length"]
        out[u] = ([((u * 7 + i * 13) % 23 - 11) / 4.0 for i in range(T)],
                  [((u * 5 + i * 11) % 19 - 9) / 4.0 for i in range(T)])
    return out


# get_final_text's hard cases: (prediction made of WordPiece tokens, original words).
FINAL_TEXT_CASES = [
    ["cafe", "Café"],                      # accent stripped in the tokens
    ["e", "Café"],                         # ... the answer is the accented letter
    ["york", "York!"],                     # punctuation split off
    ["1895", "(1895-1943)."],
    ["1895 - 1943", "(1895-1943)."],
    ["new york", "the New York Times"],
    ["tea", "tea and tea"],                # the first occurrence
    ["play", "playing"],                   # ends mid-word
    ["unbeliev", "unbelievable."],
    ["[UNK] world", "Zzyzx world"],        # an [UNK] word: not found, the whole original
    ["tokyo", "New York"],                 # not found
    ["istanbul", "İstanbul"],              # lower case is two code points, one stripped
    ["cafe", "Café"],                # combining accent: lengths differ, the original
    ["ab", "ab"],                    # control character dropped: lengths differ
    ["中", "中文"],                         # CJK spaced out
    ["naive uber", "naïve  uber"],         # two spaces between the original words
    ["", "anything"],                      # an empty prediction maps no end
    ["straße", "Straße"],                  # ß stays
    ["οδυσσευς", "ΟΔΥΣΣΕΥΣ"],              # final sigma
]


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
    eval_features = features(evals, vocab, False)
    logits = window_logits(eval_features)
    best = {}
    for ei, e in enumerate(evals):
        best[e["id"]] = nbest(e, [f for f in eval_features if f["example_index"] == ei], logits)
    return {"options": OPTIONS, "train_skipped": skipped,
            "train_ids": [e["id"] for e in train],
            "train_words": [[e["start"], e["end"]] for e in train],
            "train_features": [json_feature(f) for f in features(train, vocab, True)],
            "eval_features": [json_feature(f) for f in eval_features],
            "normalized": {p: normalize_answer(p) for p in predictions.values()},
            "score": evaluate(evals, predictions),
            "predict_options": PREDICT,
            "final_text": [[p, o, final_text(p, o)] for p, o in FINAL_TEXT_CASES],
            "eval_logits": {str(u): list(v) for u, v in logits.items()},
            "nbest": best,
            "predictions": {k: v[0][0] for k, v in best.items()},
            "predicted_score": evaluate(evals, {k: v[0][0] for k, v in best.items()})}


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
