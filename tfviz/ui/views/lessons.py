"""The Lessons view: the seed articles' three claims, one step per screen, with live numbers.

1. Concatenation is not integration: the article's 2-head example, editable, with and without a
   W_o, then the same dependency map for the loaded model's real W_o.
2. One big projection then view/transpose equals H per-head projections, on the loaded model.
3. The digit-sum model in its original setting, trained through the app's one job manager (the
   bundled `sum_seed` answers at once), predicting sums the student types.
4. W_o switched off on the loaded model, and the shipped with/without-W_o experiment's verdict.

Steps 5-8 look inside a decoder: the bundled character language model shakespeare-2l-attn
(models/language/, opened by tfviz.ui.folders whatever the sidebar has loaded; a step says so when
it is missing or unusable). Every number is measured live on it, never written down:
5. The causal mask: one head's attention on a typed line of Shakespeare, its upper triangle
   blank, and each row's sum over the keys it may read.
6. The head with the highest previous-token score on tfviz's probe, on the typed line.
7. A sentence (or the probe's kind of random letters) typed twice: the best induction head's
   stripe, and the loss and next-character accuracy on each copy. A model whose best induction
   score is low is said to have no induction head, with the number.
8. W_o switched off (the identity) in layer 0, in layer 1 and in all layers: the learned best
   induction head's score and the in-context loss drop on the probe (K-composition).
The probe's scores and one head's pattern come from tfviz.ui.induction (the Analysis view's
induction section, cached there), the traces from tfviz.ui.view.trace_for.

Each step says what to look at and asks one question with its answer folded away. Every string
a student reads goes through the language catalogue (tfviz.ui.i18n.t); numbers come from
tfviz.serve.lessons, figures from tfviz.plots. The step is tfviz.ui.state.LESSON_STEP (1..8).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import streamlit as st

from tfviz import get_task, plots
from tfviz.analysis import induction
from tfviz.core import modes
from tfviz.core.interventions import NONE, Interventions, head_name
from tfviz.core.metrics import compact
from tfviz.serve import checks, jobs, lessons
from tfviz.serve.lessons import LessonInputError
from tfviz.training.recipes import RECIPES
from tfviz.ui import atlas as atlas_view
from tfviz.ui import folders, language_atlas, state
from tfviz.ui import induction as induction_view
from tfviz.ui.i18n import current, t, why
from tfviz.ui.jobs import JobWords, job_manager, job_panel, session_alive_check
from tfviz.ui.labels import describe
from tfviz.ui.models import BUNDLED_DIR, file_sha256, load_model
from tfviz.ui.standalone import download_button
from tfviz.ui.text import md_escape
from tfviz.ui.view import View, trace_for
from tfviz.ui.widgets import chart, index_picker, number_table, plot_words

if TYPE_CHECKING:
    import plotly.graph_objects as go

STEPS = state.LESSON_STEPS
STEP_TITLES = {
    1: "lessons.step1.title",
    2: "lessons.step2.title",
    3: "lessons.step3.title",
    4: "lessons.step4.title",
    5: "lessons.step5.title",
    6: "lessons.step6.title",
    7: "lessons.step7.title",
    8: "lessons.step8.title",
}
W_O_SWITCHES = {modes.IDENTITY: "lessons.s4.mode.identity", modes.ZERO: "lessons.s4.mode.zero"}
Z_KEYS = ("lesson_z0_0", "lesson_z0_1", "lesson_z1_0", "lesson_z1_1")  # head 0, then head 1
EDIT_W = "lesson_edit_w"  # the toggle that shows the table editor
MAX_LESSON_STEPS = 2000  # training steps a student may ask for (the recipe's own is 500)
DIGITS_EXAMPLE = "31415926"
DIGITS_B = "01234567"  # seed 002 compares [0..7] with [9]*8
MODEL_LABELS = {"bundled": "lessons.s3.model.bundled", "trained": "lessons.s3.model.trained"}

# Seed 004's two ways of computing the heads' queries (shown as code: not translated).
PROJECTION_CODE = """# one big D x D projection, then split into heads (B, T, D) -> (B, H, T, d_k)
q = W_q(x).view(B, T, H, d_k).transpose(1, 2)
# H separate (d_k x D) projections: head h owns rows h*d_k .. (h+1)*d_k of W_q
q_h = x @ W_q.weight[h*d_k:(h+1)*d_k].T + W_q.bias[h*d_k:(h+1)*d_k]   # (B, T, d_k)"""


def render(view: View) -> None:
    st.subheader(t("lessons.heading"))
    step = step_navigation()
    st.markdown(f"### {t(STEP_TITLES[step])}")
    steps = {1: step_concat, 2: step_projection, 3: step_train, 4: step_switch}
    steps |= {5: step_causal, 6: step_previous, 7: step_induction, 8: step_w_o_off}
    steps[step](view)


# ---- navigation -------------------------------------------------------------------------------


def move(delta: int) -> None:
    now = state.LESSON_STEP.get(1)
    state.LESSON_STEP.set(min(max(STEPS), max(min(STEPS), now + delta)))


def step_navigation() -> int:
    """Previous / step picker / next; returns the step to show."""
    lang = current()  # for the option labels: see tfviz.ui.i18n.t
    left, middle, right = st.columns([1, 4, 1], vertical_alignment="bottom")
    with middle:
        step = st.selectbox(
            t("lessons.step_picker"),
            STEPS,
            format_func=lambda n: t(
                "lessons.step_option", n=n, title=t(STEP_TITLES[n], lang=lang), lang=lang
            ),
            key=state.LESSON_STEP.name,
        )
    left.button(
        t("lessons.prev"), key="lesson_prev", on_click=move, args=(-1,), disabled=step == STEPS[0]
    )
    right.button(
        t("lessons.next"), key="lesson_next", on_click=move, args=(1,), disabled=step == STEPS[-1]
    )
    return step


def question(q_key: str, answer: str, **values) -> None:
    """The step's one question (its {placeholders} filled from values), and its answer folded
    away."""
    st.markdown(t("lessons.question", question=t(q_key, **values)))
    with st.expander(t("lessons.show_answer")):
        st.markdown(answer)


# ---- step 1: concatenation is not integration ----------------------------------------------------


def reset_example() -> None:
    for key, value in zip(Z_KEYS, lessons.ARTICLE_Z0 + lessons.ARTICLE_Z1, strict=True):
        state.set_widget(key, value)
    state.LESSON_W_EDITOR.pop()
    state.LESSON_W_VALUES.pop()


def example_inputs() -> tuple[list[float], np.ndarray]:
    """The head outputs (4 numbers) and W_o (4 x 4, the article's layout) as edited."""
    st.markdown(t("lessons.s1.heads_label"))
    defaults = lessons.ARTICLE_Z0 + lessons.ARTICLE_Z1
    labels = ("lessons.s1.z0_0", "lessons.s1.z0_1", "lessons.s1.z1_0", "lessons.s1.z1_1")
    z = []
    for col, key, label, value in zip(st.columns(4), Z_KEYS, labels, defaults, strict=True):
        # Unbounded float inputs: a bad value (NaN from a crafted request, 1e300) gets a
        # message from the check below instead of Streamlit silently restoring the default.
        z.append(col.number_input(t(label), value=value, step=0.1, format="%g", key=key))
    st.markdown(t("lessons.s1.w_label"))
    # The article's layout: row j reads concat[j], column d builds attn_out[d].
    W = np.array(state.LESSON_W_VALUES.get(lessons.ARTICLE_W_O), dtype=np.float64)
    rows = [t("lessons.s1.w_column", j=j, h=j // 2) for j in range(4)]
    names = [t("lessons.s1.w_out", d=d) for d in range(4)]
    import pandas as pd  # only this step draws a table of W_o

    # A table editor is most of what a step change costs the browser to draw
    # (bench/ui_latency.py --lesson-steps): it is drawn on request, a plain table otherwise.
    if st.toggle(t("lessons.s1.edit_w"), key=EDIT_W):
        columns = [f"c{j}" for j in range(4)]
        config = {
            c: st.column_config.NumberColumn(name, format="%g")
            for c, name in zip(columns, names, strict=True)
        }
        frame = pd.DataFrame(W, columns=columns, index=rows)
        edited = st.data_editor(
            frame, key=state.LESSON_W_EDITOR.name, column_config=config, num_rows="fixed"
        )
        W = edited.to_numpy(dtype=np.float64, na_value=np.nan)
        state.LESSON_W_VALUES.set(W.tolist())
    else:
        shown = [[compact(x) for x in row] for row in W]
        st.table(pd.DataFrame(shown, columns=names, index=rows))
    return z, W


def step_concat(view: View) -> None:
    st.markdown(t("lessons.s1.intro"))
    model_shapes(view)
    st.info(t("lessons.s1.look"))
    st.markdown(t("lessons.s1.w_note"))
    z, W = example_inputs()
    st.button(t("lessons.s1.reset"), key="lesson_reset", on_click=reset_example)
    try:
        ex = lessons.two_head_example(z[:2], z[2:], W)
    except LessonInputError as e:
        st.error(why(e))
        ex = None
    if ex is not None:
        maps = show_example(ex)
        title = t("standalone.title.lesson", step=t(STEP_TITLES[1]))
        download_button(view, title, [(t("lessons.s1.look"), maps)], key="lesson_step1")
    show_model_dependency(view)
    shown = ex if ex is not None else lessons.two_head_example()
    c0, c1 = shown.contributions[:, 3]
    question(
        "lessons.s1.question",
        t(
            "lessons.s1.answer",
            identity=compact(shown.output_identity[3]),
            c0=compact(c0),
            c1=compact(c1),
            out=compact(shown.output[3]),
        ),
    )


def feature0_terms(ex: lessons.HeadExample) -> str:
    """attn_out[0] = sum_j concat[j] · W_o[j, 0], written out: every term whose concat number is
    not 0 (the article's 1.0 × 0.8 + 2.0 × 0.5), each with the head it comes from."""
    d_k = ex.z.shape[1]
    terms = [
        t("lessons.s1.term", z=compact(x), h=j // d_k, w=compact(ex.W_o[j, 0]))
        for j, x in enumerate(ex.concat)
        if x != 0
    ]
    return " + ".join(terms) or "0"


def model_shapes(view: View) -> None:
    """The article's shapes with the numbers of the model on screen: concat (T, h·d_k) times
    W_o (h·d_k, d_model) is attn_out (T, d_model), read from the layer's tensors themselves."""
    cfg = view.meta.config
    weight = view.model.layers[0].attn.W_o.weight  # nn.Linear: (d_model, h·d_k)
    d_model, width = weight.shape
    T: int | str = "T"  # no valid sequence typed: the letter stands
    if view.trace is not None:
        T, width = view.trace.concat[0].shape  # (T, h·d_k), as the layer computed it
    st.markdown(
        t(
            "lessons.s1.shapes",
            name=md_escape(view.entry.name),
            T=T,
            H=cfg.n_heads,
            d_k=width // cfg.n_heads,
            width=width,
            d_model=d_model,
        )
    )


def show_example(ex: lessons.HeadExample) -> go.Figure:
    """The example's table and its two maps; returns the maps' figure (drawn)."""
    rows = []
    for d in range(len(ex.concat)):
        rows.append(
            {
                t("lessons.s1.col.dim"): d,
                t("lessons.s1.col.owner"): f"H{d // ex.z.shape[1]}",
                t("lessons.s1.col.without"): compact(ex.output_identity[d]),
                t("lessons.s1.col.from0"): compact(ex.contributions[0, d]),
                t("lessons.s1.col.from1"): compact(ex.contributions[1, d]),
                t("lessons.s1.col.with"): compact(ex.output[d]),
                t("lessons.s1.col.heads_without"): int(ex.heads_drawn_on_identity[d]),
                t("lessons.s1.col.heads_with"): int(ex.heads_drawn_on[d]),
            }
        )
    st.table(rows)  # static: a data grid costs the browser far more to draw
    st.markdown(
        t(
            "lessons.s1.feature0",
            terms=feature0_terms(ex),
            out=compact(ex.output[0]),
        )
    )
    maps = plots.dependency_pair(
        ex.dependency_identity,
        ex.dependency,
        titles=(t("lessons.s1.map_without"), t("lessons.s1.map_with")),
        head_label=t("lessons.map.head"),
        output_label=t("lessons.map.output"),
        value_label=t("lessons.map.contribution"),
        words=plot_words(),
    )
    chart(maps, key="lesson_maps")
    st.caption(t("lessons.s1.maps_axes"))  # the table's rows are concat dims, the maps' outputs
    return maps


def show_model_dependency(view: View) -> None:
    cfg = view.meta.config
    # On request: a third chart on this step's first paint put a step change over its budget
    # (bench/ui_latency.py --lesson-steps), and the real W_o reads best after the small example.
    show = t("lessons.s1.show_model", name=md_escape(view.entry.name))
    if not st.toggle(show, key="lesson_show_model"):
        return
    st.markdown(t("lessons.s1.model_intro", name=md_escape(view.entry.name)))
    layer = index_picker(t("lessons.layer"), cfg.n_layers, key="lesson_dep_layer", prefix="L")
    dep = lessons.model_dependency(view.model, layer)  # (D, H)
    drawn = lessons.heads_drawn_on(dep)
    chart(
        plots.dependency_map(
            dep,
            title=t("lessons.s1.map_model", layer=layer),
            head_label=t("lessons.map.head"),
            output_label=t("lessons.map.output"),
            value_label=t("lessons.map.weight"),
            words=plot_words(),
        ),
        key="lesson_map_model",
    )
    st.markdown(
        t(
            "lessons.s1.model_summary",
            all=int((drawn == cfg.n_heads).sum()),
            one=int((drawn <= 1).sum()),
            D=cfg.d_model,
            H=cfg.n_heads,
            share=f"{lessons.DRAWN_ON:.0%}",
        )
    )


# ---- step 2: one big projection = H per-head projections -----------------------------------------


def step_projection(view: View) -> None:
    st.markdown(t("lessons.s2.intro"))
    st.code(PROJECTION_CODE, language="python")
    st.info(t("lessons.s2.look"))
    if view.text is None:
        st.warning(t("lessons.need_sequence"))
        return
    cfg = view.meta.config
    layer = index_picker(t("lessons.layer"), cfg.n_layers, key="lesson_proj_layer", prefix="L")
    ids, pad = view.task.encode_batch([view.text], device=view.model.device)
    check = lessons.projection_equivalence(view.model, layer, ids, pad)
    B, H, T, d_k = check.shape
    st.markdown(
        t("lessons.s2.sequence", text=md_escape(view.text), T=T, H=H, d_k=d_k, D=cfg.d_model)
    )
    # The shapes of the tensors just computed (check.shape), not the config's promise of them.
    st.markdown(t("lessons.s2.shapes", T=T, H=H, d_k=d_k, D=H * d_k))
    for col, (role, diff) in zip(st.columns(3), check.max_diff.items(), strict=True):
        col.metric(t("lessons.s2.diff", role=role), difference_text(diff))
    n = min(d_k, 8)
    rows = [
        {t("lessons.s2.col.way"): t("lessons.s2.way.big")}
        | {f"[{i}]": compact(v) for i, v in enumerate(check.big_first[:n])},
        {t("lessons.s2.col.way"): t("lessons.s2.way.separate")}
        | {f"[{i}]": compact(v) for i, v in enumerate(check.separate_first[:n])},
    ]
    st.caption(t("lessons.s2.table_caption", n=n, d_k=d_k))
    st.dataframe(rows, hide_index=True, key="lesson_projection_table")
    worst = max(check.max_diff.values())
    if check.exact:  # "0.00e+00: float32 rounding" would tell a student rounding happened
        answer = t("lessons.s2.answer_exact")
    else:
        answer = t("lessons.s2.answer", worst=difference_text(worst))
    question("lessons.s2.question", answer)


def difference_text(diff: float) -> str:
    """A difference as shown: a plain 0 when it is exactly zero (not "0.00e+00", which reads as
    a rounded value), else in scientific notation, as rounding-sized differences are."""
    return "0" if diff == 0.0 else f"{diff:.2e}"


# ---- step 3: the digit-sum model of seed 002, trained as a job -----------------------------------


@st.cache_resource(show_spinner=False)
def bundled_seed_model(device: str):
    """The bundled sum_seed model (shared, never changed), or None if its file is unusable."""
    path = BUNDLED_DIR / f"{lessons.LESSON_RECIPE}.safetensors"
    try:
        stat = path.stat()
    except OSError:
        return None
    digest = file_sha256(str(path), stat.st_mtime_ns, stat.st_size)
    model, _, _ = load_model(str(path), digest, device)
    return model


def step_train(view: View) -> None:
    recipe = RECIPES[lessons.LESSON_RECIPE]
    sizes = recipe["sizes"]
    st.markdown(t("lessons.s3.intro"))
    st.markdown(
        t(
            "lessons.s3.recipe",
            d_model=sizes["d_model"],
            heads=sizes["n_heads"],
            layers=sizes["n_layers"],
            d_ff=sizes["d_ff"],
            dropout=sizes["dropout"],
            steps=recipe["steps"],
            batch=recipe["batch_size"],
            lr=recipe["lr"],
            length=recipe["max_len"],
        )
    )
    st.info(t("lessons.s3.look"))
    collect_trained()
    train_controls(recipe["steps"])
    snap = job_panel(state.LESSON_JOB.get(), "lesson_cancel", LESSON_WORDS)
    if snap is not None and snap.status == jobs.DONE:
        chart(
            plots.loss_curve(snap.losses, snap.loss_every, snap.total, words=plot_words()),
            key="lesson_loss_curve",
        )
    bundled = bundled_seed_model(str(view.model.device))
    models = {}
    if bundled is not None:
        models["bundled"] = bundled
    else:
        st.error(t("lessons.s3.no_bundled"))
    trained = state.LESSON_TRAINED.get()
    if trained is not None:
        models["trained"] = trained.model
    if not models:
        return
    if state.LESSON_MODEL_CHOICE.get() not in models:
        state.LESSON_MODEL_CHOICE.pop()
    lang = current()
    choice = st.radio(
        t("lessons.s3.which_model"),
        list(models),
        format_func=lambda k: t(MODEL_LABELS[k], lang=lang),
        key=state.LESSON_MODEL_CHOICE.name,
        horizontal=True,
    )
    # No max_chars: a browser drops a longer paste without a word; the check below says why.
    text = st.text_input(t("lessons.s3.digits"), value=DIGITS_EXAMPLE, key="lesson_digits")
    task = get_task(recipe["task"])
    valid = text.isascii() and text.isdigit() and 1 <= len(text) <= task.max_len
    if not valid:
        st.error(t("lessons.s3.bad_digits", n=task.max_len))
    else:
        predicted, right = lessons.predict(models[choice], task, text)
        st.markdown(t("lessons.s3.prediction", text=text, predicted=predicted, right=right))
        if len(text) != recipe["max_len"]:
            st.caption(t("lessons.s3.other_length", length=recipe["max_len"]))
    if valid:
        compare_attention(models[choice], task, text)
    probe = "9" * recipe["max_len"]
    predicted, right = lessons.predict(models[choice], task, probe)
    question(
        "lessons.s3.question",
        t("lessons.s3.answer", text=probe, predicted=predicted, right=right),
    )


def compare_attention(model, task, text: str) -> None:
    """Seed 002's point: attention is computed from the input. The typed digits' attention
    beside a second sequence's (the article's 01234567 unless the student types another)."""
    st.markdown(t("lessons.s3.attention_intro"))
    other = st.text_input(t("lessons.s3.digits_b"), value=DIGITS_B, key="lesson_digits_b")
    if not (other.isascii() and other.isdigit() and len(other) == len(text)):
        st.error(t("lessons.s3.bad_digits_b", n=len(text)))
        return
    n_layers = len(model.layers)
    layer = index_picker(t("lessons.layer"), n_layers, key="lesson_attn_layer", prefix="L")
    pair = lessons.attention_pair(model, task, text, other)
    for col, side, shown, attn, labels in zip(
        st.columns(2), "ab", (text, other), pair.attn, pair.labels, strict=True
    ):
        with col:
            figure = plots.attention_grid(
                attn[[layer]], labels, [layer], title=shown, words=plot_words()
            )
            chart(figure, key=f"lesson_attention_{side}")
    st.markdown(t("lessons.s3.attention_diff", layer=layer, diff=compact(pair.max_diff[layer])))


def train_controls(recipe_steps: int) -> None:
    left, right = st.columns([1, 2], vertical_alignment="bottom")
    steps = left.number_input(
        t("lessons.s3.steps"),
        value=float(recipe_steps),
        step=100.0,
        format="%.0f",
        key="lesson_steps",
        help=t("lessons.s3.steps_help", n=MAX_LESSON_STEPS, recipe=recipe_steps),
    )
    clicked = right.button(t("lessons.s3.start"), key="lesson_train", type="primary")
    if not clicked:
        return
    job = state.LESSON_JOB.get()
    if job is not None and job.state().active:
        st.error(t("lessons.s3.still_running"))
        return
    try:
        n = checks.whole_number(steps, "steps", 1, MAX_LESSON_STEPS)
    except ValueError:
        st.error(t("lessons.s3.bad_steps", n=MAX_LESSON_STEPS))
        return
    work = lessons.RecipeWork(lessons.RecipeSpec(steps=n))
    try:
        state.LESSON_JOB.set(job_manager().submit(work, is_alive=session_alive_check()))
    except (ValueError, jobs.QueueFull) as e:
        st.error(t("lessons.s3.not_started", why=why(e)))


def collect_trained() -> None:
    """Once per finished lesson job: keep its model in this session and show it."""
    job: jobs.Job | None = state.LESSON_JOB.get()
    if job is None or state.LESSON_COLLECTED.get() == job.id:
        return
    snap = job.state()
    if snap.active:
        return
    state.LESSON_COLLECTED.set(job.id)
    if snap.status == jobs.DONE and snap.result is not None:
        state.LESSON_TRAINED.set(snap.result)  # this session only: never saved
        state.LESSON_MODEL_CHOICE.set("trained")


def lesson_values(snap: jobs.JobState) -> dict:
    """The lesson training's sentences' values: the steps done and the last loss on the bar; once
    done, the steps, the time to a tenth of a second and the error on fresh sequences."""
    if snap.status == jobs.DONE:
        mae = compact(snap.result.metrics["mae"]) if snap.result is not None else ""
        return {"steps": snap.total, "seconds": f"{snap.seconds:.1f}", "mae": mae}
    loss = compact(snap.loss) if snap.loss is not None else ""
    return {"step": snap.done, "steps": snap.total, "loss": loss}


LESSON_WORDS = JobWords(
    queued="lessons.s3.queued",
    progress="lessons.s3.progress",
    starting="lessons.s3.starting",
    stop="lessons.s3.cancel",
    done="lessons.s3.done",
    cancelled="lessons.s3.cancelled",
    failed="lessons.s3.failed",
    values=lesson_values,
)


# ---- step 4: W_o switched off, and the experiment ----------------------------------------------


def step_switch(view: View) -> None:
    st.markdown(t("lessons.s4.intro"))
    st.info(t("lessons.s4.look"))
    cfg = view.meta.config
    if view.text is None:
        st.warning(t("lessons.need_sequence"))
    elif not cfg.n_out:
        st.warning(t("lessons.s4.no_head"))
    else:
        lang = current()
        left, right = st.columns(2)
        mode = left.radio(
            t("lessons.s4.mode"),
            list(W_O_SWITCHES),
            format_func=lambda m: t(W_O_SWITCHES[m], lang=lang),
            key="lesson_w_o",
        )
        layer = right.selectbox(
            t("lessons.s4.where"),
            [None, *range(cfg.n_layers)],
            format_func=lambda n: t("lessons.all_layers", lang=lang) if n is None else f"L{n}",
            key="lesson_w_o_layer",
        )
        result = lessons.w_o_switch(view.model, view.task, view.text, mode, layer)
        rows = [
            (t("lessons.s4.row.learned"), result.learned),
            (t("lessons.s4.row.switched"), result.switched),
            (t("lessons.s4.row.answer"), result.answer),
        ]
        rows = [
            {t("lessons.s4.col.what"): what, t("lessons.s4.col.prediction"): said}
            for what, said in rows
        ]
        st.dataframe(rows, hide_index=True, key="lesson_switch_table")
        st.markdown(
            t(
                "lessons.s4.changed",
                tokens=result.tokens_changed,
                change=compact(result.max_change),
            )
        )
    show_experiment(view)


def show_experiment(view: View) -> None:
    """The atlas's answer (tfviz.ui.atlas): where W_o matters, where not, and the run that
    tests why; then the same question asked of language models (tfviz.ui.language_atlas), when
    its rows are there; the step's question is answered from the toy atlas's numbers."""
    answer = atlas_view.lesson()
    if (on_text := language_atlas.lesson_text()) is not None:
        st.markdown(on_text)
    if answer is not None:
        question("lessons.s4.question", answer)


# ---- steps 5-8: a decoder, the bundled character language model ---------------------------------

LESSON_LM = "shakespeare-2l-attn"  # its folder: tfviz.ui.folders.LANGUAGE_DIR / LESSON_LM
LINE_EXAMPLE = "To be, or not to be, that is the question"
SENTENCE_EXAMPLE = "The king is dead."
LINE_CHARS = (2, 100)  # a typed line's length, at least and at most: one map row a character
SENTENCE_CHARS = (2, 60)  # one copy of step 7's sentence (typed twice it must fit the context)
# Steps 5 and 6 draw the same box (same key, label and default): the line goes from one to the
# other.
LINE_KEY = "lesson_line"
REPEAT_SOURCES = {"sentence": "lessons.s7.source.sentence", "letters": "lessons.s7.source.letters"}
# What each step says of the model's best head of a kind, by induction.head_verdict.
PREVIOUS_ANSWERS = {
    "formed": "lessons.s6.answer_formed",
    "weak": "lessons.s6.answer_weak",
    "none": "lessons.s6.answer_none",
}
INDUCTION_ANSWERS = {
    "formed": "lessons.s7.answer_formed",
    "weak": "lessons.s7.answer_weak",
    "none": "lessons.s7.answer_none",
}


def lesson_lm(view: View) -> View | None:
    """The decoder lessons' model, the bundled LESSON_LM, as a View of its own (learned W_o,
    nothing switched), whatever model the sidebar has loaded; None after saying why when its
    folder is missing or it cannot be used."""
    problems: list[str] = []
    entries = folders.root_entries(folders.LANGUAGE_DIR, problems, folders.BUNDLED_KEY_PREFIX)
    entry = next((e for e in entries if e.name == LESSON_LM), None)
    if entry is None:
        st.warning(t("lessons.lm.missing", name=LESSON_LM))  # a name of ours: not escaped
        for problem in problems:  # a refused folder, with the library's reason
            st.caption(problem)
        return None
    model, meta, task = folders.load_folder(entry.path, entry.digest, str(view.model.device))
    if model is None:
        st.error(t("lessons.lm.cannot_load", name=md_escape(entry.name), why=why(meta)))
        return None
    if not getattr(task, "causal", False) or task.tokenizer.alphabet is None:
        st.error(md_escape(t("lessons.lm.not_character", name=entry.name)))
        return None
    return View(entry=entry, model=model, meta=meta, task=task, interventions=NONE)


def lm_intro(lm: View, short: bool = False) -> None:
    """Which model steps 5-8 read, with its shape from its config: at length on step 5, in one
    line on the others (a link may open any of them)."""
    cfg = lm.model.config
    shape = "lessons.lm.shape_ffn" if cfg.ffn else "lessons.lm.shape_attn"
    shape = t(shape, layers=cfg.n_layers, heads=cfg.n_heads, context=cfg.max_len)
    if short:
        st.caption(t("lessons.lm.short", name=md_escape(lm.entry.name), shape=shape))
    else:
        st.markdown(t("lessons.lm.intro", name=md_escape(lm.entry.name), shape=shape))


def score_text(x: float) -> str:
    """A head's score as shown: two significant digits, so that 0.0002 is not rounded to 0."""
    return f"{x:.2g}"


def typed_line(lm: View) -> str | None:
    """Steps 5 and 6's line of Shakespeare, or None after an error saying why it is refused."""
    alphabet = "".join(sorted(lm.task.tokenizer.alphabet)).replace("\n", "↵")
    low, high = LINE_CHARS
    text = st.text_input(
        t("lessons.s5.line"),
        value=LINE_EXAMPLE,
        key=LINE_KEY,
        help=t("lessons.s5.line_help", low=low, high=high, alphabet=md_escape(alphabet)),
    )
    if not low <= len(text) <= high:  # no echo of the text: it may be a long paste
        st.error(t("lessons.s5.line_length", low=low, high=high, n=len(text)))
        return None
    try:
        return lm.task.validate(text)
    except ValueError as e:  # characters outside the model's alphabet, named by the catalogue
        st.error(why(e))
        return None


def head_map(trace, layer: int, head: int, title: str, key: str) -> None:
    """One head's attention on a traced text, its masked cells blank (NaN)."""
    weights = trace.shown(trace.attn[layer, head])
    chart(plots.attention_map(weights, trace.labels, title, words=plot_words()), key=key)


# ---- step 5: the causal mask ------------------------------------------------------------------


def step_causal(view: View) -> None:
    lm = lesson_lm(view)
    if lm is None:
        return
    lm_intro(lm)
    st.markdown(t("lessons.s5.intro"))
    text = typed_line(lm)
    if text is None:
        return
    cfg = lm.model.config
    left, right = st.columns(2)
    with left:
        layer = index_picker(t("lessons.layer"), cfg.n_layers, "lesson_mask_layer", "L")
    with right:
        head = index_picker(t("induction.head"), cfg.n_heads, "lesson_mask_head", "H")
    st.info(t("lessons.s5.look"))
    trace = trace_for(lm, text, NONE)
    title = t("lessons.s5.map_title", head=head_name(layer, head))
    head_map(trace, layer, head, title, key="lesson_mask_map")
    rows = lessons.causal_rows(trace.attn)
    question(
        "lessons.s5.question",
        t(
            "lessons.s5.answer",
            error=difference_text(rows.row_error),
            heads=cfg.n_layers * cfg.n_heads,
            T=len(trace.labels),
            above=compact(rows.above),
            masked=rows.masked,
            cells=rows.masked + rows.allowed,
        ),
    )


# ---- step 6: a previous-token head --------------------------------------------------------------


def step_previous(view: View) -> None:
    lm = lesson_lm(view)
    if lm is None:
        return
    lm_intro(lm, short=True)
    learned = induction_view.scores_for(lm, NONE)
    st.markdown(t("lessons.s6.intro", n=learned.n_seqs, period=learned.period))
    layer, head, score = lessons.previous_token_head(learned)
    name = head_name(layer, head)
    st.markdown(t("lessons.s6.found", head=name, score=score_text(score)))
    text = typed_line(lm)
    if text is None:
        return
    trace = trace_for(lm, text, NONE)
    line = lessons.previous_token_line(trace.attn[layer, head])
    even = learned.even("previous_token")
    verdict = induction.head_verdict(score, even)
    answer = t(
        PREVIOUS_ANSWERS[verdict],
        head=name,
        probe=score_text(score),
        line=score_text(line.score),
        hits=line.hits,
        queries=line.queries,
        even=score_text(even),
        k=f"{induction.WEAK_OVER_EVEN:g}",
    )
    question("lessons.s6.question", answer, head=name)
    head_map(trace, layer, head, t("lessons.s5.map_title", head=name), key="lesson_prev_map")
    st.caption(t("lessons.s6.caption"))


# ---- step 7: an induction head on a repeated sentence ------------------------------------------


@st.cache_data(show_spinner=False, max_entries=64)
def cached_repeat(digest: str, sentence: str, _model, _task) -> lessons.RepeatedSentence:
    """The sentence typed twice through the model (tfviz.serve.lessons.repeated_sentence), per
    model digest and sentence; a ValueError is raised again, not cached."""
    return lessons.repeated_sentence(_model, _task, sentence)


def repeat_source(lm: View) -> str | None:
    """One copy of step 7's text: the student's sentence or the probe's kind of random letters;
    None after an error saying why a sentence is refused."""
    lang = current()
    source = st.radio(
        t("lessons.s7.source"),
        list(REPEAT_SOURCES),
        format_func=lambda k: t(REPEAT_SOURCES[k], lang=lang),
        key="lesson_repeat_source",
        horizontal=True,
    )
    if source == "letters":
        ids = induction_view.probe_token_ids(lm)
        return lessons.random_letters(lm.task.tokenizer, ids)
    low, high = SENTENCE_CHARS
    sentence = st.text_input(
        t("lessons.s7.sentence"),
        value=SENTENCE_EXAMPLE,
        key="lesson_sentence",
        help=t("lessons.s7.sentence_help", low=low, high=high),
    )
    if not low <= len(sentence) <= high:
        st.error(t("lessons.s5.line_length", low=low, high=high, n=len(sentence)))
        return None
    return sentence


def step_induction(view: View) -> None:
    lm = lesson_lm(view)
    if lm is None:
        return
    lm_intro(lm, short=True)
    st.markdown(t("lessons.s7.intro"))
    sentence = repeat_source(lm)
    if sentence is None:
        return
    try:
        rep = cached_repeat(lm.entry.digest, sentence, _model=lm.model, _task=lm.task)
    except ValueError as e:
        st.error(why(e))
        return
    st.markdown(t("lessons.s7.text", n=rep.period))
    st.code(rep.text, language=None, wrap_lines=True)  # typed text: shown inert
    learned = induction_view.scores_for(lm, NONE)
    layer, head, best = learned.best()
    name = head_name(layer, head)
    even = learned.even()
    s = rep.scores
    drop = s.in_context_drop
    parts = [
        t(
            "lessons.s7.answer_losses",
            first=f"{s.loss_first:.2f}",
            repeat=f"{s.loss_repeat:.2f}",
            acc_first=f"{rep.acc_first:.0%}",
            acc_repeat=f"{rep.acc_repeat:.0%}",
        ),
        t("lessons.s7.better" if drop > 0 else "lessons.s7.not_better", drop=f"{drop:.2f}"),
        t(
            INDUCTION_ANSWERS[induction.head_verdict(best, even)],
            head=name,
            score=score_text(best),
            here=score_text(float(s.induction[layer, head])),
            even=score_text(even),
            k=f"{induction.WEAK_OVER_EVEN:g}",
        ),
    ]
    question("lessons.s7.question", "\n\n".join(parts))
    title = t("lessons.s7.map_title", head=name)
    head_map(rep.trace, layer, head, title, key="lesson_induction_map")
    st.caption(t("lessons.s7.map_caption", head=name))
    st.caption(t("induction.stripe_caption", period=rep.period))
    curves = {t("lessons.s7.curve"): s.loss_by_position}
    chart(
        plots.induction_losses(curves, rep.period, t("lessons.s7.loss_title"), words=plot_words()),
        key="lesson_induction_losses",
    )
    st.caption(t("lessons.loss_caption"))


# ---- step 8: W_o switched off in layer 0 --------------------------------------------------------


def w_o_off_switches(n_layers: int) -> list[Interventions]:
    """The learned model, W_o off (the identity) in each layer, and in all layers."""
    one = [Interventions(w_o={layer: modes.IDENTITY}) for layer in range(n_layers)]
    return [NONE, *one, *([Interventions(w_o=modes.IDENTITY)] if n_layers > 1 else [])]


def step_w_o_off(view: View) -> None:
    lm = lesson_lm(view)
    if lm is None:
        return
    lm_intro(lm, short=True)
    st.markdown(t("lessons.s8.intro"))
    measured = {
        iv: induction_view.scores_for(lm, iv) for iv in w_o_off_switches(lm.model.config.n_layers)
    }
    learned = measured[NONE]
    off0 = measured[Interventions(w_o={0: modes.IDENTITY})]
    layer, head, best = learned.best()
    name = head_name(layer, head)
    switched = float(off0.induction[layer, head])
    even = learned.even()
    if induction.head_verdict(best, even) == "none":
        outcome = "lessons.s8.answer_none"
    else:
        outcome = (
            "lessons.s8.answer_kept"
            if lessons.head_kept(best, switched)
            else "lessons.s8.answer_lost"
        )
    values = dict(
        head=name,
        learned=score_text(best),
        switched=score_text(switched),
        even=score_text(even),
        drop=f"{learned.in_context_drop:.2f}",
        drop_off=f"{off0.in_context_drop:.2f}",
    )
    parts = [t(outcome, **values)]
    if layer == 0:
        parts.append(t("lessons.s8.answer_layer0", head=name))
    parts.append(t("lessons.s8.answer_why"))
    question("lessons.s8.question", "\n\n".join(parts))
    st.caption(t("lessons.s8.table_caption", n=learned.n_seqs, period=learned.period))
    rows = [
        {
            t("induction.col.switch"): describe(iv),
            t("induction.col.that_head", head=name): float(s.induction[layer, head]),
            t("induction.col.best_any"): float(s.induction.max()),
            t("induction.col.drop"): s.in_context_drop,
        }
        for iv, s in measured.items()
    ]
    number_table(rows, key="lesson_w_o_off_table")
    curves = {describe(iv): s.loss_by_position for iv, s in measured.items()}
    chart(
        plots.induction_losses(
            curves, learned.period, t("lessons.s8.loss_title"), words=plot_words()
        ),
        key="lesson_w_o_off_losses",
    )
    st.caption(t("lessons.loss_caption"))
