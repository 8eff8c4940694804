"""Issue 16: no text box drops what a student pastes without a word.

A box with Streamlit's max_chars ignores, in the browser, any change that would make it longer:
a long paste leaves the old text and no message (tests/browser/test_browser_inert.py shows it in
Chromium for the sequence boxes). So no box sets max_chars; each takes the whole text and
refuses a too-long one with a message saying what is allowed. AppTest passes the whole text on
to the script once max_chars is gone, so both halves are checked here for every box the app
has (the Train form's model name is tests/ui/test_hostile_app.py's).
"""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from tests.conftest import start_with_state
from tfviz.ui.i18n import translate

pytestmark = pytest.mark.usefixtures("fresh_app")
LONG = "1" * 10_000  # every box's limit is far below this


def open_parts_section(section: str) -> AppTest:
    return start_with_state(view=translate("en", "app.view.parts"), parts_section=section)


# (how to open the page, the box's key)
BOXES = [
    (lambda: start_with_state(), "sequence"),
    (lambda: open_parts_section("modes"), "parts_k"),
    (lambda: open_parts_section("permutation"), "parts_order"),
    (lambda: open_parts_section("diff"), "parts_seq_b"),
    (
        lambda: start_with_state(view=translate("en", "app.view.lessons"), lesson_step=3),
        "lesson_digits",
    ),
]


@pytest.mark.parametrize("open_page, key", BOXES, ids=[key for _, key in BOXES])
def test_a_box_takes_a_long_paste_whole_and_says_why_it_is_refused(open_page, key):
    at = open_page()
    box = at.text_input(key=key)
    assert box.proto.max_chars == 0, f"{key} sets max_chars: a browser drops a longer paste"
    errors = len(at.error)
    box.set_value(LONG).run()
    assert not at.exception, at.exception
    assert at.text_input(key=key).value == LONG  # the script got all of it
    messages = [e.value for e in at.error]
    assert len(messages) == errors + 1, messages  # and said why it is refused
    assert all(len(m) < 600 for m in messages)  # without echoing the paste back
