"""The browser session's state: every key the app keeps in st.session_state, and the only module
that touches it.

Each key is a constant here (a Key: its string, the type of its value, and a comment that says
why the session keeps it), read and written through the Key's small accessors, so that one file
says what a session holds and who may change it. The strings never change: shared links
(tfviz.ui.share), the AppTest tests and the browser tests name widgets by them.

A widget whose value the code reads or sets has its Key here too, and is drawn with
`key=KEY.name`. Widgets whose values the code only forgets (a stale choice before the widget is
drawn, every per-model widget when the model changes) are named by their views; `forget`,
`widget_value` and `set_widget` take their names.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import streamlit as st

if TYPE_CHECKING:  # types only: this module imports nothing of the app at run time
    from tfviz.lessons import RecipeResult
    from tfviz.serve.jobs import Job

T = TypeVar("T")


class Key(Generic[T]):
    """One session key; T is the type of its value."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"Key({self.name!r})"

    def get(self, default: T | None = None) -> T | None:
        return st.session_state.get(self.name, default)

    def set(self, value: T) -> None:
        st.session_state[self.name] = value

    def pop(self, default: T | None = None) -> T | None:
        return st.session_state.pop(self.name, default)

    def is_set(self) -> bool:
        return self.name in st.session_state

    def setdefault(self, value: T) -> T:
        return st.session_state.setdefault(self.name, value)


# ---- the page: app.py, the sidebar, the address -------------------------------------------------

# This session's browser has been sent the chart code once (app.first_paint's warm-up, which runs
# before torch is imported: this module and the tfviz package load none).
BROWSER_WARMED: Key[bool] = Key("_browser_warmed")
# The open tab's label (the tabs' widget): links and the language switch set it before the tabs.
VIEW: Key[str] = Key("view")
# The address's query as last read from the browser or written to it (tfviz.ui.router): key ->
# its values.
ADDRESS: Key[dict] = Key("_address")
# The model picker's value, a ModelEntry key such as "bundled:reverse".
MODEL: Key[str] = Key("model")
# The model shown on the last run: a change puts the new task's first example in the box.
SHOWN_MODEL: Key[str] = Key("_shown_model")
# A model key a view asks the picker to show on the next whole-page run (a view cannot set the
# picker itself: it is drawn before the views, or not at all in a fragment run).
OPEN_MODEL: Key[str] = Key("_open_model")
# The sequence box, and a sentence model's second sentence.
SEQUENCE: Key[str] = Key("sequence")
SENTENCE_B: Key[str] = Key("sentence_b")
# "png" or "svg": what the charts' camera button saves.
CHART_FORMAT: Key[str] = Key("chart_format")
# The language picker's value ("en", "zh"), and the language the last run drew: a change
# relabels every widget (tfviz.ui.i18n).
LANG: Key[str] = Key("lang")
LANG_SHOWN: Key[str] = Key("_lang_shown")
# The sidebar's switches (tfviz.ui.switches): W_o's mode, its rank, the layer it applies to, and
# the zeroed heads.
W_O_MODE: Key[str] = Key("w_o_mode")
W_O_RANK: Key[int] = Key("w_o_rank")
W_O_SCOPE: Key[Any] = Key("w_o_scope")
ABLATE: Key[list] = Key("ablate")

# A shared link (tfviz.ui.share): read once per session; what it asked for that needs the model,
# kept until the model is loaded; a training it says was running; the notices still shown.
LINK_READ: Key[bool] = Key("_share_restored")
LINK_PENDING: Key[Any] = Key("_share_pending")
TRAINING_ASKED: Key[str] = Key("_share_training")
NOTICES: Key[list] = Key("_share_notices")

# Uploaded models (tfviz.ui.uploads): the file uploader's value; {"upload:<sha256>": Upload},
# kept in this session only and never written to disk; (kind, catalogue key, values) about the
# latest upload, translated when shown so a language switch words it anew.
UPLOAD_FILE: Key[Any] = Key("upload")
UPLOADS: Key[dict] = Key("_uploads")
UPLOAD_MESSAGE: Key[tuple] = Key("_upload_message")

# ---- the Train view and the jobs it shares ------------------------------------------------------

# This session's training job, and its W_o retraining with the name of the model retrained.
TRAIN_JOB: Key[Job] = Key("train_job")
RETRAIN_JOB: Key[Job] = Key("retrain_job")
RETRAIN_MODEL_NAME: Key[str] = Key("retrain_model_name")
# The id of the job the picker was last listed after: a finished job lists the models again once.
TRAIN_LISTED_AFTER: Key[str] = Key("_train_listed_after")
# The free name the form last proposed, and that a job took the form's name (propose another).
TRAIN_NAME_PROPOSED: Key[str] = Key("_train_name_proposed")
TRAIN_NAME_USED: Key[bool] = Key("_train_name_used")
# The Train form's widgets that a task's first-run recipe fills in.
TRAIN_TASK: Key[str] = Key("train_task")
TRAIN_NAME: Key[str] = Key("train_name")
TRAIN_STEPS: Key[float] = Key("train_steps")
TRAIN_LR: Key[float] = Key("train_lr")
# The Train form's "causal" box: cleared when the task picked is one a causal model cannot learn.
TRAIN_CAUSAL: Key[bool] = Key("train_causal")
# The names of the models this session submitted for training: the picker calls those "yours"
# and every other model in the user models folder a class model (it is listed for everyone).
TRAINED_HERE: Key[list] = Key("_trained_here")
# The training timeline's slider: a step of the shown model's timeline.
TIMELINE_STEP: Key[int] = Key("timeline_step")
# A language model's training (the Train view's language part): this session's job, the id of
# the job the picker was last listed after, the form's name field, and that a job took the
# name (the next run of the form proposes another).
LM_JOB: Key[Job] = Key("lm_job")
LM_LISTED_AFTER: Key[int] = Key("_lm_listed_after")
LM_NAME: Key[str] = Key("lm_name")
LM_NAME_USED: Key[bool] = Key("_lm_name_used")

# ---- "Does W_o matter?" ------------------------------------------------------------------------

# This session's experiment rerun, its results by job id, the job last collected, and the source
# picker (the bundled results or this session's rerun).
EXPERIMENT_JOB: Key[Job] = Key("experiment_job")
EXPERIMENT_RERUNS: Key[dict] = Key("experiment_reruns")
EXPERIMENT_COLLECTED: Key[str] = Key("experiment_collected")
EXPERIMENT_SOURCE: Key[str] = Key("exp_source")
# Who this session is to the atlas sweeps (its rows' file is named after it), and its sweep of
# an atlas cell (a job of the one manager: tfviz.serve.work.AtlasSweep).
ATLAS_OWNER: Key[str] = Key("atlas_owner")
ATLAS_JOB: Key[Job] = Key("atlas_job")

# ---- Lessons ------------------------------------------------------------------------------------

# The lesson step shown, one of LESSON_STEPS (a link may set it: tfviz.ui.share).
LESSON_STEP: Key[int] = Key("lesson_step")
LESSON_STEPS = (1, 2, 3, 4, 5, 6, 7, 8)  # 5-8: a decoder (the bundled language model)
# Step 1: the table editor of W, and W as the student left it (the editor is not always drawn).
LESSON_W_EDITOR: Key[Any] = Key("lesson_w")
LESSON_W_VALUES: Key[list] = Key("lesson_w_values")
# Step 3: this session's training, its trained model (never saved), the job last collected, and
# the model picked (the bundled one or the trained one).
LESSON_JOB: Key[Job] = Key("lesson_job")
LESSON_TRAINED: Key[RecipeResult] = Key("lesson_trained")
LESSON_COLLECTED: Key[str] = Key("lesson_collected")
LESSON_MODEL_CHOICE: Key[str] = Key("lesson_model_choice")

# ---- other views --------------------------------------------------------------------------------

# "Take W_o apart": this session's guesses by question, and the teacher's reset (None, "confirm"
# asked, or "done").
PARTS_GUESSES: Key[dict] = Key("parts_guesses")
# A decoder's greedy continuations asked for in this session (tfviz.ui.next_token): (model
# digest, text, switches) -> (learned tokens, switched tokens), filled token by token, so a run
# stopped by a click shows what was written, and a rerun does not write it again.
CONTINUATIONS: Key[dict] = Key("next_continuations")
PARTS_RESET_STEP: Key[str] = Key("parts_reset_step")
# How attention weights are coloured on every attention view (tfviz.plots.WEIGHT_SCALES: 0..1,
# fitted, log), kept here apart from its widgets: each view draws its own picker, and Streamlit
# drops a widget's value on a run that does not draw it (another tab).
WEIGHT_SCALE: Key[str] = Key("weight_scale")
# "W_o off": the layer compared, above the switched one.
COMPARE_LAYER: Key[int] = Key("compare_layer")
# Analysis: how many top heads are kept.
IMPORTANCE_K: Key[int] = Key("importance_k")


# ---- widgets named by their views ---------------------------------------------------------------


def widget_value(name: str) -> Any:
    """The value of the widget with key `name`, None before it is drawn."""
    return st.session_state.get(name)


def set_widget(name: str, value: Any) -> None:
    """Set a widget's value before it is drawn this run (Streamlit refuses it after)."""
    st.session_state[name] = value


def set_widgets(values: Mapping[str, Any]) -> None:
    """Set several widgets' values at once (a link's switches)."""
    st.session_state.update(values)


def forget(*names: str) -> None:
    """Drop widgets' values: each is drawn again from its default."""
    for name in names:
        st.session_state.pop(name, None)


def names() -> Iterator[str]:
    """Every key the session holds now (a copy: the caller may set values meanwhile)."""
    return iter(list(st.session_state))
