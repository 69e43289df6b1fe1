#!/usr/bin/env python3
"""Differential test of the core's two strict JSON readers against Python's json module.

Generates JSON-like texts aimed at the places readers disagree (number tokens valid and nearly
valid, string escapes and surrogates, nesting up to and past the limit, whitespace and control
bytes, trailing text, random byte mutations), reads each with json_diff (the C driver: the tree
parser, the streaming reader, and the streaming reader's check alone) and with Python's json held
to RFC 8259: parse_constant refuses NaN/Infinity, and what the readers refuse on purpose is
refused here too (a \\u0000 escape, a lone surrogate, more than 1000 nested containers). All three
must accept exactly what the oracle accepts, the two readers with the same value (numbers
compared by token text, strings by bytes, members in order with duplicates). A disagreement is printed and written to --out, and the exit status is 1.

  json_diff.py --driver build/tests/fuzz/json_diff [--seconds 20] [--cases N] [--seed S]
"""
import argparse
import json
import os
import random
import struct
import subprocess
import sys
import time

LIMIT = 1000  # CJSON_NESTING_LIMIT


class Tok(str):
    """A number token as written."""


class Refused(Exception):
    pass


def refuse_constant(name):
    raise Refused(name)


def canon_str(s):
    out = bytearray(b'"')
    for b in s.encode("utf-8"):
        if b in (0x22, 0x5C):
            out += b"\\" + bytes([b])
        elif b < 0x20:
            out += b"\\u%04x" % b
        else:
            out.append(b)
    return bytes(out + b'"')


def check_str(s):
    if "\0" in s or any(0xD800 <= ord(c) <= 0xDFFF for c in s):
        raise Refused("a NUL or a lone surrogate")  # refused on purpose by both readers


class Obj(list):
    """An object's (key, value) pairs in order, duplicates kept."""


def canon(v, depth=1):
    if v is None:
        return b"null"
    if v is True:
        return b"true"
    if v is False:
        return b"false"
    if isinstance(v, Tok):
        return b"#" + v.encode()
    if isinstance(v, str):
        check_str(v)
        return canon_str(v)
    if depth > LIMIT:
        raise Refused("nested deeper than the limit")
    if isinstance(v, Obj):
        parts = []
        for k, x in v:
            check_str(k)
            parts.append(canon_str(k) + b":" + canon(x, depth + 1))
        return b"{" + b",".join(parts) + b"}"
    return b"[" + b",".join(canon(x, depth + 1) for x in v) + b"]"


def oracle(data):
    """b"OK <canonical>" or b"ERR"; None when the text is not UTF-8 (no opinion)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    try:
        v = json.loads(text, parse_constant=refuse_constant, parse_int=Tok, parse_float=Tok,
                       object_pairs_hook=Obj)
        return b"OK " + canon(v)
    except (ValueError, Refused, RecursionError):
        return b"ERR"


# ---- the generator --------------------------------------------------------------------------

GOOD_NUMBERS = ["0", "-0", "1", "-1", "10", "123456789", "9007199254740993", "-9223372036854775808",
                "18446744073709551616", "0.5", "-0.0", "1.25e3", "1E3", "1e+3", "1e-3", "2.5E-10",
                "1e400", "-1e-400", "0e0", "123.456e78"]
BAD_NUMBERS = ["00", "01", "-01", "2.", "1.e2", ".5", "+1", "-", "1e", "1e+", "1.5.2", "0x10",
               "1_000", "--1", "-.5", "NaN", "Infinity", "-Infinity", "1ee2", "0.e1", "1.0e",
               "012.5", "1 2", "1,", "-0-"]
ESCAPES = ['\\"', "\\\\", "\\/", "\\b", "\\f", "\\n", "\\r", "\\t", "\\u0041", "\\u00e9",
           "\\u20ac", "\\ud83d\\ude00", "\\uD834\\uDD1E", "\\u0000", "\\ud800", "\\udc00",
           "\\ud800x", "\\ud800\\u0041", "\\x", "\\u12", "\\u12g4", "\\", "\\'", "\\U0041"]
WS_GOOD = ["", " ", "\n", "\t", "\r\n", "  "]
WS_BAD = ["\x0b", "\x0c", "\x00", "\xa0", "\u3000"]
PLAIN = ["a", "abc", "é", "€", "😀", "\x7f", " ", "\x01", "\x1f", "\t", "\n", "key", "x y"]


def ws(rng):
    if rng.random() < 0.02:
        return rng.choice(WS_BAD)
    return rng.choice(WS_GOOD) if rng.random() < 0.4 else ""


def number(rng):
    if rng.random() < 0.25:
        return rng.choice(BAD_NUMBERS)
    if rng.random() < 0.5:
        return rng.choice(GOOD_NUMBERS)
    s = ("-" if rng.random() < 0.3 else "") + rng.choice(["0", str(rng.randint(1, 10 ** rng.randint(1, 20)))])
    if rng.random() < 0.3:
        s += "." + str(rng.randint(0, 10 ** rng.randint(1, 6)))
    if rng.random() < 0.2:
        s += rng.choice("eE") + rng.choice(["", "+", "-"]) + str(rng.randint(0, 400))
    return s


def string(rng):
    parts = []
    for _ in range(rng.randint(0, 4)):
        r = rng.random()
        if r < 0.35:
            parts.append(rng.choice(ESCAPES) if rng.random() < 0.7 else
                         "\\u%04x" % rng.randint(0, 0xFFFF))
        else:
            parts.append(rng.choice(PLAIN) if rng.random() < 0.97 else chr(rng.randint(0, 31)))
    return '"' + "".join(parts) + '"'


def value(rng, depth):
    r = rng.random()
    if depth > 6 or r < 0.3:
        return rng.choice([number(rng), number(rng), string(rng), "true", "false", "null",
                           rng.choice(["tru", "nul", "False", "None", "undefined"]) if
                           rng.random() < 0.05 else "null"])
    n = rng.randint(0, 4)
    if r < 0.65:
        items = [ws(rng) + value(rng, depth + 1) + ws(rng) for _ in range(n)]
        tail = "," if rng.random() < 0.03 else ""
        return "[" + ",".join(items) + tail + "]"
    keys = [string(rng) if rng.random() < 0.5 else '"k%d"' % rng.randint(0, 3) for _ in range(n)]
    items = [ws(rng) + k + ws(rng) + ":" + ws(rng) + value(rng, depth + 1) + ws(rng) for k in keys]
    tail = "," if rng.random() < 0.03 else ""
    return "{" + ",".join(items) + tail + "}"


def nested(rng):
    d = rng.choice([LIMIT - 1, LIMIT, LIMIT + 1, rng.randint(1, 1200)])
    inner = rng.choice(["", "0", '"x"', "[]", "{}"])
    if rng.random() < 0.5:
        return "[" * d + inner + "]" * d
    return '{"a":' * d + (inner or "1") + "}" * d


MUT = b' \t\n\r"\\/,:[]{}0123456789.eE+-tfnu\x00\x01\x1f\x7f\xc3\xa9\xff'


def mutate(rng, b):
    b = bytearray(b)
    for _ in range(rng.randint(1, 3)):
        op = rng.random()
        i = rng.randint(0, len(b)) if b else 0
        if op < 0.4 and b:
            b[min(i, len(b) - 1)] = rng.choice(MUT)
        elif op < 0.7:
            b.insert(i, rng.choice(MUT))
        elif b:
            del b[min(i, len(b) - 1)]
    return bytes(b)


def case(rng):
    r = rng.random()
    if r < 0.03:
        text = nested(rng)
    else:
        text = ws(rng) + value(rng, 0) + ws(rng)
        if rng.random() < 0.03:
            text += rng.choice([" x", "{}", ",", "\x00", " 1"])
    data = text.encode("utf-8", "surrogatepass")
    if rng.random() < 0.3:
        data = mutate(rng, data)
    return data


def run(driver, cases):
    stdin = b"".join(struct.pack("<I", len(c)) + c for c in cases)
    out = subprocess.run([driver], input=stdin, stdout=subprocess.PIPE, check=True).stdout
    lines = out.split(b"\n")
    return [(lines[3 * i], lines[3 * i + 1], lines[3 * i + 2]) for i in range(len(cases))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--driver", required=True, help="the json_diff executable")
    ap.add_argument("--seconds", type=float, default=20.0, help="stop after this long")
    ap.add_argument("--cases", type=int, default=0, help="stop after this many (0: by time)")
    ap.add_argument("--seed", type=int, default=None, help="random seed (default: the time)")
    ap.add_argument("--out", default="json_diff_failure.bin", help="where a failing case goes")
    args = ap.parse_args()
    sys.setrecursionlimit(20000)
    seed = args.seed if args.seed is not None else int(time.time())
    rng = random.Random(seed)
    start = time.monotonic()
    total = accepted = refused = no_opinion = 0
    batch = 2000
    while True:
        if args.cases and total >= args.cases:
            break
        if not args.cases and time.monotonic() - start >= args.seconds:
            break
        n = batch if not args.cases else min(batch, args.cases - total)
        cases = [case(rng) for _ in range(n)]
        for data, (tree, tape, check) in zip(cases, run(args.driver, cases)):
            total += 1
            want = oracle(data)
            if want is None:
                no_opinion += 1
                continue
            # the check alone says only whether the text is accepted
            for name, got, whole in (("tree", tree, want), ("stream", tape, want),
                                     ("check", check, b"OK")):
                ok = got == whole if want != b"ERR" else got.startswith(b"ERR ")
                if not ok:
                    with open(args.out, "wb") as f:
                        f.write(data)
                    print(f"json_diff: the {name} reader disagrees with the oracle (seed {seed}, "
                          f"case {total})\n  text   {data!r:.400}\n  oracle {want!r:.300}\n"
                          f"  reader {got!r:.300}\n  (written to {args.out})", file=sys.stderr)
                    return 1
            if want == b"ERR":
                refused += 1
            else:
                accepted += 1
    secs = time.monotonic() - start
    print(json.dumps({"json_diff": {"seed": seed, "cases": total, "accepted": accepted,
                                    "refused": refused, "not_utf8": no_opinion,
                                    "seconds": round(secs, 1), "ok": True}}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
