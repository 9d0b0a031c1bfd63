#!/usr/bin/env python3
"""Generates src/text/unicode_tables.inc: the character tables behind the BERT normalizer.

Tables (read through src/text/unicode.h; included by src/text/unicode.cc):
  * a flag byte per code point in a two-stage table (256-code-point blocks, deduplicated):
      kRemove      dropped by clean_text (Cc except TAB/LF/CR, Cf, Co, U+0000, U+FFFD)
      kWhitespace  Rust char::is_whitespace (the Unicode White_Space property)
      kPunct       BERT punctuation: ASCII punctuation or a Unicode P* category
      kMn          general category Mn (removed when stripping accents)
      kHasNfd      has a canonical decomposition (Hangul syllables are decomposed algorithmically)
      kHasLower    lowercases to something else (possibly several code points)
  * the full canonical decomposition (NFD) of every code point that has one, except Hangul;
  * the full lowercase mapping (Rust char::to_lowercase, no context-dependent rules).

The data come from Python's unicodedata (its Unicode version is written into the output). The
reference implementation, Hugging Face `tokenizers`, compiles in Unicode data of several other
versions (its category tables are older, Rust's lowercase table newer). With --match-hf (the
default) the script asks the installed `tokenizers` how it treats every code point and adopts its
answer where the two differ, so Surge reproduces it exactly; the number of such code points is
written into the output.

Usage: .venv/bin/python tools/text/gen_unicode_tables.py [--out src/text/unicode_tables.inc]
"""
import argparse
import sys
import unicodedata as ud

K_REMOVE, K_WS, K_PUNCT, K_MN, K_NFD, K_LOWER = 1, 2, 4, 8, 16, 32
HANGUL_BASE, HANGUL_COUNT = 0xAC00, 11172
BLOCK = 256


def is_surrogate(cp):
    return 0xD800 <= cp <= 0xDFFF


def rust_whitespace(cp):
    # White_Space: Python's str.isspace() also accepts U+001C..U+001F, which White_Space excludes.
    return chr(cp).isspace() and not (0x1C <= cp <= 0x1F)


def base_tables():
    flags = [0] * 0x110000
    nfd, lower = {}, {}
    for cp in range(0x110000):
        if is_surrogate(cp):
            continue
        c = chr(cp)
        cat = ud.category(c)
        f = 0
        if cp in (0, 0xFFFD) or (cat in ("Cc", "Cf", "Co") and c not in "\t\n\r"):
            f |= K_REMOVE
        if rust_whitespace(cp):
            f |= K_WS
        if (cp < 128 and 33 <= cp <= 126 and not c.isalnum()) or cat.startswith("P"):
            f |= K_PUNCT
        if cat == "Mn":
            f |= K_MN
        d = ud.normalize("NFD", c)
        if d != c and not (HANGUL_BASE <= cp < HANGUL_BASE + HANGUL_COUNT):
            nfd[cp] = [ord(x) for x in d]
        lo = c.lower()
        if lo != c:
            lower[cp] = [ord(x) for x in lo]
        flags[cp] = f
    return flags, nfd, lower


def match_hf(flags, nfd, lower):
    """Adopts the behaviour of the installed `tokenizers` where it differs; returns #code points."""
    from tokenizers.normalizers import NFD, BertNormalizer
    from tokenizers.pre_tokenizers import BertPreTokenizer
    clean = BertNormalizer(clean_text=True, handle_chinese_chars=False, strip_accents=False,
                           lowercase=False)
    low = BertNormalizer(clean_text=False, handle_chinese_chars=False, strip_accents=False,
                         lowercase=True)
    strip = BertNormalizer(clean_text=False, handle_chinese_chars=False, strip_accents=True,
                           lowercase=False)
    hf_nfd = NFD()
    pre = BertPreTokenizer()
    changed = set()
    hf_nfd_map = {}
    for cp in range(0x110000):
        if is_surrogate(cp):
            continue
        c = chr(cp)
        f = flags[cp]
        g = clean.normalize_str(c)
        f = (f & ~K_REMOVE) | (K_REMOVE if g == "" else 0)
        pieces = [t for t, _ in pre.pre_tokenize_str("a" + c + "b")]
        f &= ~(K_WS | K_PUNCT)
        if pieces == ["a", "b"]:
            f |= K_WS
        elif pieces == ["a", c, "b"]:
            f |= K_PUNCT
        d = hf_nfd.normalize_str(c)
        if d != c and not (HANGUL_BASE <= cp < HANGUL_BASE + HANGUL_COUNT):
            hf_nfd_map[cp] = [ord(x) for x in d]
        if d == c:
            f = (f & ~K_MN) | (K_MN if strip.normalize_str(c) == "" else 0)
        lo = low.normalize_str(c)
        if (lower.get(cp) or [cp]) != [ord(x) for x in lo]:
            changed.add(cp)
            if lo == c:
                lower.pop(cp, None)
            else:
                lower[cp] = [ord(x) for x in lo]
        if f != flags[cp]:
            changed.add(cp)
            flags[cp] = f
    for cp in set(nfd) ^ set(hf_nfd_map) | {k for k in nfd if nfd[k] != hf_nfd_map.get(k)}:
        changed.add(cp)
    nfd.clear()
    nfd.update(hf_nfd_map)
    # Stripping must agree too: NFD then drop Mn, per code point.
    for cp in range(0x110000):
        if is_surrogate(cp) or HANGUL_BASE <= cp < HANGUL_BASE + HANGUL_COUNT:
            continue
        seq = nfd.get(cp, [cp])
        mine = "".join(chr(x) for x in seq if not flags[x] & K_MN)
        if mine != strip.normalize_str(chr(cp)):
            sys.exit(f"strip mismatch at U+{cp:04X}: {mine!r} vs {strip.normalize_str(chr(cp))!r}")
    return len(changed)


def write_map(out, name, m):
    keys = sorted(m)
    pool, index = [], []
    for k in keys:
        index.append((len(pool) << 3) | len(m[k]))
        assert len(m[k]) < 8
        pool.extend(m[k])
    out.write(f"const uint32_t k{name}Count = {len(keys)};\n")
    for arr, typ, vals in ((f"k{name}Keys", "char32_t", keys), (f"k{name}Index", "uint32_t", index),
                           (f"k{name}Pool", "char32_t", pool)):
        out.write(f"const {typ} {arr}[] = {{\n")
        for i in range(0, len(vals), 12):
            out.write("    " + ", ".join(f"0x{v:X}" for v in vals[i:i + 12]) + ",\n")
        out.write("};\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", default="src/text/unicode_tables.inc")
    ap.add_argument("--no-match-hf", action="store_true")
    args = ap.parse_args()
    flags, nfd, lower = base_tables()
    note = "none (--no-match-hf)"
    if not args.no_match_hf:
        import tokenizers
        n = match_hf(flags, nfd, lower)
        note = f"{n} code points adopted from tokenizers {tokenizers.__version__}"
    for cp in nfd:
        flags[cp] |= K_NFD
    for cp in lower:
        flags[cp] |= K_LOWER
    blocks, stage1, stage2 = {}, [], []
    for b in range(0x110000 // BLOCK):
        blk = tuple(flags[b * BLOCK:(b + 1) * BLOCK])
        if blk not in blocks:
            blocks[blk] = len(blocks)
            stage2.extend(blk)
        stage1.append(blocks[blk])
    with open(args.out, "w", encoding="utf-8", newline="\n") as out:
        out.write("// Generated by tools/text/gen_unicode_tables.py; do not edit.\n")
        out.write(f"// Unicode version (Python unicodedata): {ud.unidata_version}\n")
        out.write(f"// Differences from it to match Hugging Face tokenizers: {note}\n")
        
        out.write(f"const uint16_t kFlagStage1[{len(stage1)}] = {{\n")
        for i in range(0, len(stage1), 16):
            out.write("    " + ", ".join(str(v) for v in stage1[i:i + 16]) + ",\n")
        out.write("};\n")
        out.write(f"const uint8_t kFlagStage2[{len(stage2)}] = {{\n")
        for i in range(0, len(stage2), 32):
            out.write("    " + ",".join(str(v) for v in stage2[i:i + 32]) + ",\n")
        out.write("};\n")
        write_map(out, "Nfd", nfd)
        write_map(out, "Lower", lower)
    print(f"wrote {args.out}: {len(blocks)} flag blocks, {len(nfd)} decompositions, "
          f"{len(lower)} lowercase mappings; {note}")


if __name__ == "__main__":
    main()
