"""Models a student uploads: checked before use and kept in that browser session only.

An upload is never written to disk and never unpickled: its size is checked before the bytes are
read, its parameter count before a model is built (checks.load_upload), everything else by
load_checkpoint. One session holds at most MAX_UPLOADS of them; they go when the tab closes.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import streamlit as st

from tfviz import CheckpointError, settings
from tfviz.hf import PretrainedError
from tfviz.refusal import Refusal
from tfviz.serve import checks
from tfviz.training.checkpoint import CheckpointMeta
from tfviz.ui import folders, state
from tfviz.ui.i18n import DEFAULT, current, t, why
from tfviz.ui.labels import task_label
from tfviz.ui.models import ModelEntry
from tfviz.ui.text import cut, md_escape

MB = 1024 * 1024  # Streamlit's megabyte
SERVER_LIMIT = "server.maxUploadSize"  # Streamlit's own cap on a request body, in MB
MAX_UPLOADS = 3  # models one session holds; one more upload drops the oldest
SHOWN_NAME_CHARS = 60  # an uploaded file's name in the picker is cut to this
MESSAGE_NAME_CHARS = 120  # and in messages about it
# What the uploader takes: a tfviz checkpoint, or a model folder in the Hugging Face layout
# zipped (a browser cannot send a folder through one file box). Its label names each of them.
UPLOAD_TYPES = ("safetensors", "zip")


class TooLarge(Refusal):
    """A file over the upload limit, refused before it is read (catalogue key
    "uploads.too_large"); worded in the page's language when shown, like the library's refusals."""

    PREFIX = "uploads."


@dataclass(frozen=True)
class Upload:
    """A model uploaded in this session: kept in its session_state, never written to disk."""

    entry: ModelEntry
    model: object
    meta: CheckpointMeta
    task: object = None  # a zipped model folder's SentenceTask; None: a checkpoint's own task


def session_uploads() -> dict[str, Upload]:
    """This session's uploads by picker key, oldest first."""
    return state.UPLOADS.get({})


def upload_limit_mb() -> int:
    """Largest upload in MB: $TFVIZ_MAX_UPLOAD_MB (tfviz.settings), capped by
    server.maxUploadSize: Streamlit's server refuses larger bodies whatever a widget says, so a
    larger setting would only promise what the server will not take."""
    return min(settings.upload_mb(), int(st.get_option(SERVER_LIMIT)))


def shown_name(file_name: str) -> str:
    """An uploaded file's name for the picker: without .safetensors, cut to SHOWN_NAME_CHARS."""
    stem = file_name[: -len(".safetensors")] if file_name.endswith(".safetensors") else file_name
    return cut(stem or file_name, SHOWN_NAME_CHARS)


def read_upload(file, device: str, limit_mb: int) -> Upload:
    """Check an UploadedFile and build its model; TooLarge past the limit, CheckpointError
    saying what else is wrong."""
    if file.size > limit_mb * MB:
        raise TooLarge("too_large", size=f"{file.size / MB:.1f}", limit=limit_mb)
    data = file.getvalue()
    digest = hashlib.sha256(data).hexdigest()
    key = f"upload:{digest}"
    known = session_uploads().get(key)
    if known is not None:
        return known
    model, meta = checks.load_upload(data, max_bytes=limit_mb * MB, device=device)
    entry = ModelEntry(key, shown_name(file.name), "uploaded", "", digest)
    return Upload(entry=entry, model=model, meta=meta)


def read_zip_upload(file, device: str, limit_mb: int) -> Upload:
    """A zipped Hugging Face model folder (tfviz.ui.folders); TooLarge for a file over the
    limit, hf.PretrainedError with the library's reason for a refused zip or folder."""
    if file.size > limit_mb * MB:
        raise TooLarge("too_large", size=f"{file.size / MB:.1f}", limit=limit_mb)
    data = file.getvalue()
    known = session_uploads().get(f"upload:{hashlib.sha256(data).hexdigest()}")
    if known is not None:
        return known
    entry, model, meta, task = folders.open_zip_upload(
        data, cut(file.name, SHOWN_NAME_CHARS + 4), device, limit_mb
    )
    return Upload(entry=entry, model=model, meta=meta, task=task)


def on_upload(device: str, limit_mb: int) -> None:
    """The uploader's on_change: check the new file once and, if it is good, pick it."""
    state.UPLOAD_MESSAGE.pop()
    file = state.UPLOAD_FILE.get()
    if file is None:
        return  # taken out of the uploader: the model stays in this session's picker
    name = cut(file.name, MESSAGE_NAME_CHARS)  # shown literally: the message is md_escaped
    try:
        if file.name.lower().endswith(".zip"):
            upload = read_zip_upload(file, device, limit_mb)
        else:
            upload = read_upload(file, device, limit_mb)
    except (TooLarge, CheckpointError, PretrainedError) as e:  # worded when shown (upload_box)
        state.UPLOAD_MESSAGE.set(("error", "uploads.refused", {"name": name, "why": e.detached()}))
        return
    except Exception as e:  # a hostile file must get a message, never a traceback
        state.UPLOAD_MESSAGE.set(
            (
                "error",
                "uploads.unreadable",
                {"name": name, "error": type(e).__name__},
            )
        )
        return
    uploads = state.UPLOADS.setdefault({})
    uploads.pop(upload.entry.key, None)
    uploads[upload.entry.key] = upload  # newest last
    while len(uploads) > MAX_UPLOADS:
        uploads.pop(next(iter(uploads)))
    state.MODEL.set(upload.entry.key)
    c = upload.meta.config
    state.UPLOAD_MESSAGE.set(
        (
            "success",
            "uploads.loaded",
            {
                "name": name,
                "task": task_label(upload.meta.task),
                "d_model": c.d_model,
                "heads": c.n_heads,
                "layers": c.n_layers,
            },
        )
    )


# Streamlit writes its uploader's button ("Upload") and limit ("20MB per file • ...") in
# English whatever the page's language, and takes no text for them. In another language the two
# are drawn from the catalogue instead, by CSS over Streamlit's own elements (their test ids).
UPLOADER_CSS = (
    "<style>"
    '[data-testid="stFileUploaderDropzone"] button [data-testid="stMarkdownContainer"] p,'
    '[data-testid="stFileUploaderDropzoneInstructions"] span {{ font-size: 0; }}'
    '[data-testid="stFileUploaderDropzone"] button [data-testid="stMarkdownContainer"] p::after'
    " {{ content: {button}; font-size: 0.875rem; }}"
    '[data-testid="stFileUploaderDropzoneInstructions"] span {{ white-space: normal; }}'
    '[data-testid="stFileUploaderDropzoneInstructions"] span::after'
    " {{ content: {limit}; font-size: 0.875rem; }}"
    "</style>"
)


def css_string(text: str) -> str:
    """text as a CSS string literal: quoted, with what could end it or the style escaped."""
    return (
        '"' + "".join(c if c.isalnum() or c in " .,:;()" else f"\\{ord(c):x} " for c in text) + '"'
    )


def uploader_words(limit_mb: int) -> None:
    """The uploader's button and limit in the page's language (UPLOADER_CSS); in English,
    Streamlit's own."""
    if current() == DEFAULT:
        return
    button = css_string(t("uploads.button"))
    types = ", ".join(kind.upper() for kind in UPLOAD_TYPES)
    limit = css_string(t("uploads.limit", limit=limit_mb, types=types))
    st.html(UPLOADER_CSS.format(button=button, limit=limit))


def upload_box(device: str) -> None:
    """The sidebar's uploader and what happened to the last file put into it."""
    try:
        limit_mb = upload_limit_mb()
    except ValueError as e:  # a bad setting on the server
        st.error(md_escape(t("uploads.unavailable", why=e)))
        return
    uploader_words(limit_mb)
    st.file_uploader(
        t("uploads.label"),
        type=list(UPLOAD_TYPES),
        key=state.UPLOAD_FILE.name,
        max_upload_size=limit_mb,
        on_change=on_upload,
        args=(device, limit_mb),
        help=t("uploads.help", limit=limit_mb, params=f"{settings.MAX_PARAMS:,}")
        + " "
        + t("folder.upload_help"),
    )
    message = state.UPLOAD_MESSAGE.get()
    if message is not None:
        kind, key, values = message
        # The file's name and the reason made inert, the sentence's own markup kept.
        values = {
            k: why(v) if isinstance(v, Refusal) else md_escape(v) if isinstance(v, str) else v
            for k, v in values.items()
        }
        (st.error if kind == "error" else st.success)(t(key, **values))
