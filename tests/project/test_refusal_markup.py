"""A refusal reads as a sentence on a Chinese page: the catalogue's own markup (a file name in
backticks) is drawn, not shown as literal backticks, while what a file or a user supplied stays
inert; and no English reaches a Chinese refusal from a server setting or the operating system
(issue 44). The pages' own use is checked in tests/ui/test_app.py and
tests/ui/test_app_folders.py."""

from __future__ import annotations

import errno
import re
from string import Formatter

import pytest

from tfviz import settings
from tfviz.refusal import Refusal, worded
from tfviz.ui.text import md_escape
from tfviz.words import catalogue, translate

HAN = re.compile(r"[\u4e00-\u9fff]")
CODE_SPAN = re.compile(r"`[^`]*`")


def fields(text: str) -> dict[str, str]:
    """A sentence's placeholders and their format specs ("" where none)."""
    return {name: spec or "" for _, name, spec, _ in Formatter().parse(text) if name}


def refusal_keys(lang: str) -> list[str]:
    return sorted(k for k in catalogue(lang) if k.startswith("refusal."))


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_every_refusal_sentence_keeps_its_markup_whole_and_its_values_inert(lang):
    """Every refusal key, its placeholders filled with a value that holds markdown: the sentence's
    backticks pair up into code spans (none left over to show literally), and each value shows
    escaped, never as markup."""
    hostile = "a*b_[x](y)`z`"
    for key in refusal_keys(lang):
        text = catalogue(lang)[key]
        assert text.count("`") % 2 == 0, (key, text)
        values = {  # a number where the sentence formats one ({size:.1f}), else the text
            name: 1.5 if spec else md_escape(hostile) for name, spec in fields(text).items()
        }
        said = translate(lang, key, **values)
        assert "\\`" not in CODE_SPAN.sub("", said.replace(md_escape(hostile), "")), key
        outside = CODE_SPAN.sub("", said.replace(md_escape(hostile), ""))
        assert "`" not in outside, (key, said)


class _Sample(Refusal):
    PREFIX = "refusal.checkpoint."


def test_a_refusal_escapes_its_values_and_keeps_the_catalogue_s_code_spans():
    e = _Sample("pickle")
    zh = e.text("zh", md_escape)
    assert "`pickle`" in zh and "\\`" not in zh  # drawn as code on the page
    nested = _Sample("metadata_not_json", why=_Sample("pickle"))
    assert nested.text("zh", md_escape).count("`") % 2 == 0
    # a key whose values are text: a value's * is escaped, not emphasis
    key = next(
        k
        for k in refusal_keys("en")
        if k.startswith(_Sample.PREFIX)
        and (f := fields(catalogue("en")[k]))
        and not any(f.values())
    )
    named = _Sample(
        key.removeprefix(_Sample.PREFIX), **dict.fromkeys(fields(catalogue("en")[key]), "9*9")
    )
    assert "9\\*9" in named.text("en", md_escape) and "9*9" in str(named)


@pytest.mark.parametrize(
    "reader, environ",
    [
        (settings.pretrained_dir, {settings.PRETRAINED_DIR_ENV: "/no/such/folder"}),
        (settings.upload_mb, {settings.UPLOAD_MB_ENV: "lots"}),
        (settings.drain_seconds, {settings.DRAIN_SECONDS_ENV: "99999"}),
        (settings.max_jobs, {settings.MAX_JOBS_ENV: "0"}),
        (settings.max_queue, {settings.MAX_QUEUE_ENV: "-1"}),
    ],
)
def test_a_bad_server_setting_is_said_in_chinese_on_a_chinese_page(reader, environ):
    name = next(iter(environ))
    with pytest.raises(ValueError) as refused:
        reader(environ)
    assert isinstance(refused.value, settings.SettingError)
    assert name in str(refused.value) and "must" in str(refused.value)  # the server's log
    zh = worded(refused.value, "zh", md_escape)
    assert HAN.search(zh) and "must" not in zh and md_escape(name) in zh


@pytest.mark.parametrize(
    "code, key",
    [
        (errno.ENOENT, "os_missing"),
        (errno.EACCES, "os_permission"),
        (errno.ENOSPC, "os_disk_full"),
        (errno.EISDIR, "os_is_folder"),
    ],
)
def test_an_operating_system_error_is_said_in_the_page_s_language(code, key):
    error = OSError(code, "the system's English words", "/some/path")
    zh = worded(error, "zh", md_escape)
    assert zh == translate("zh", f"refusal.cause.{key}")
    assert "English" not in zh and "/some/path" not in zh
