#!/usr/bin/env python3
"""Writes a deterministic source-like tree for the grep benchmark (doc/benchmarks.md, §6b).

    bench/gen_tree.py DIR [--files 24000]     # default: 24,000 files, ~252 MB

Files of 2–19 KB of text lines (mean ~10.5 KB) drawn from a fixed pool of pseudo-code lines,
100 to a folder (`dNN/sNN/fNNNNN.txt`), plus one hidden folder (`.hidden/`). NEEDLE_RE matches
one line in every 400th file and one in `.hidden/` (61 lines for the default size): few enough
to stay under the grep tools' 100-match limit, so every tool reads the whole tree. No ignore
files and no binary files: rg, pi's grep (rg --hidden) and ours do the same work and must print
the same matches. The same arguments always give the same bytes.
"""
import argparse
import os
import random

NEEDLE_RE = r"handoff_needle_[0-9a-f]{4}"
WORDS_SEED = 20261129


def pool(rng):
    words = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz_") for _ in range(rng.randint(2, 10)))
             for _ in range(2000)]
    shapes = ["    let {} = {}({}, {});\n", "fn {}({}: {}) -> {} {{\n", "    // {} {} {} {}\n",
              "    if {} == {} {{ return {}; }} // {}\n", "{} = {} + {} * {}\n", "    }}\n",
              "import {} from '{}/{}/{}';\n", "    {}.{}({}).{}();\n"]
    lines = []
    for _ in range(8192):
        shape = rng.choice(shapes)
        lines.append(shape.format(*(rng.choice(words) for _ in range(4))).encode())
    return lines


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--files", type=int, default=24000)
    args = ap.parse_args()
    rng = random.Random(WORDS_SEED)
    lines = pool(rng)
    total = 0
    needles = 0
    for i in range(args.files):
        folder = os.path.join(args.dir, f"d{i // 1000:02d}", f"s{(i // 100) % 10:02d}")
        if i % 100 == 0:
            os.makedirs(folder, exist_ok=True)
        size = rng.randint(2000, 19000)
        body = []
        n = 0
        while n < size:
            line = lines[rng.getrandbits(13)]
            body.append(line)
            n += len(line)
        if i % 400 == 123:
            body.insert(len(body) // 2, f"    let marker = \"handoff_needle_{i % 65536:04x}\"; // file {i}\n".encode())
            needles += 1
        data = b"".join(body)
        with open(os.path.join(folder, f"f{i:05d}.txt"), "wb") as f:
            f.write(data)
        total += len(data)
    hidden = os.path.join(args.dir, ".hidden")
    os.makedirs(hidden, exist_ok=True)
    with open(os.path.join(hidden, "notes.txt"), "wb") as f:
        data = b"".join(lines[:50]) + b"hidden: handoff_needle_beef\n" + b"".join(lines[50:100])
        f.write(data)
    total += len(data)
    needles += 1
    print(f"{args.files + 1} files, {total / 1e6:.1f} MB, {needles} matching lines")


if __name__ == "__main__":
    main()
