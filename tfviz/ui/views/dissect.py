"""The "Take W_o apart" view: which part of W_o does the model need?

"W_o off" removes two things at once: each head's own linear map and the mixing across heads.
Five experiments, one at a time (only the chosen section runs):

1. W_o modes: the task's accuracy (MiniLM: the similarity of sentences A and B) with W_o learned,
   block-diagonal (each head's own map, no mixing), rank-k over k, identity and zero, in one
   chart, beside W_o's singular values.
2. Head permutation: shuffling the heads in concat changes the output, unless W_o's column blocks
   are shuffled alike; then it is identical (the largest difference is printed).
3. Pattern override: one head's attention replaced by a fixed pattern; the prediction and the
   head's term z_h W_o^h before and after.
4. Two inputs: per head, how attention, concat and W_o's output differ between two sequences.
5. Predict, then reveal: a guess committed before the answer, then the class's guesses.

The k box above the sections sets the rank that the chart marks and the rank-k question asks
about. Every number comes from cached library calls; nothing here changes the shared model.
"""

from __future__ import annotations

import functools

import numpy as np
import streamlit as st

from tfviz import dissect, plots, wo
from tfviz.interventions import COPY_PREFIX, NONE, PATTERNS, Interventions
from tfviz.pretrained import PARAPHRASE_PAIR
from tfviz.tally import Tally
from tfviz.trace import diff_inputs
from tfviz.ui import state, switches
from tfviz.ui.i18n import current, t
from tfviz.ui.labels import refusal
from tfviz.ui.switches import w_o_label
from tfviz.ui.text import changed_tokens, md_escape, prediction_table
from tfviz.ui.view import (
    View,
    accuracy_cache,
    accuracy_for,
    cached_w_o,
    per_model,
    similarity,
    trace_for,
)
from tfviz.ui.widgets import chart, index_picker, plot_words

# Its widgets whose options depend on the model: forgotten when the model changes.
PER_MODEL_KEYS = per_model(
    "parts_k",
    "parts_order",
    "parts_seq_b",
    "parts_scope",
    "parts_perm_layer",
    "parts_pat_layer",
    "parts_pat_head",
    "parts_pat_source",
    "parts_diff_layer",
)


SECTIONS = ("modes", "permutation", "pattern", "diff", "predict")
COPY = "copy"  # the pattern picker's value for "copy another head's pattern"
# What the guess is about: a mode, or rank-k with k from the box above.
QUESTION_MODES = (wo.BLOCK_DIAGONAL, "identity", switches.RANK, "zero")
CHOICES = ("yes", "no")
# The question every student answers about the same numbers: a drop of the task's accuracy by
# more than this on the fixed examples, or of the paraphrase pair's similarity (MiniLM).
ACCURACY_DROP = 0.10
SIMILARITY_DROP = 0.10


def render(view: View) -> None:
    lang = current()
    section = st.segmented_control(
        t("parts.section"),
        SECTIONS,
        default=SECTIONS[0],
        format_func=lambda s: t(f"parts.section.{s}", lang=lang),
        key="parts_section",
        required=True,
    )
    k = rank_box(view)
    if section in ("permutation", "pattern", "diff") and view.trace is None:
        st.info(t("parts.need_sequence"))  # the box above says what is wrong with it
        return
    if section == "modes":
        modes_section(view, k)
    elif section == "permutation":
        permutation_section(view)
    elif section == "pattern":
        pattern_section(view)
    elif section == "diff":
        diff_section(view)
    else:
        predict_section(view, k)


def rank_box(view: View) -> int | None:
    """The k of rank-k W_o (1..D) typed in a box; None, after a message, when it is not one."""
    D = view.meta.config.d_model
    d_k = view.meta.config.d_k
    typed = st.text_input(
        t("parts.k", d=D),
        value=str(d_k),
        key="parts_k",  # no max_chars: a browser drops a longer paste without a word
        width=260,
        help=t("parts.k_help", d=D, d_k=d_k),
    )
    try:
        return dissect.parse_rank(typed, D)
    except ValueError:
        st.error(md_escape(t("parts.k_bad", d=D, got=typed.strip()[:12])))
        return None


def mode_names(lang: str) -> dict[str, str]:
    """The legend names of the mode-sweep chart."""
    names = {mode: w_o_label(mode, lang=lang) for mode in dissect.WHOLE_MODES}
    return {**names, "rank": t("parts.modes.rank_curve", lang=lang)}


# ---- 1. W_o modes -----------------------------------------------------------------------------


def measure_for(view: View):
    """(measure(iv) -> float, its name), cached per switches; None after a message if there is
    nothing to measure (a sentence model whose sentences are refused)."""
    if view.is_sentence:
        if view.text is None or view.text_b is None:
            st.info(t("parts.need_sentences"))
            return None

        def switched_similarity(iv: Interventions) -> float:
            return similarity(view, view.text, view.text_b, iv).switched

        return switched_similarity, t("parts.modes.similarity")
    metric = view.task.metric

    def accuracy(iv: Interventions) -> float:
        return accuracy_for(view, iv)[metric]

    return accuracy, t(f"parts.metric.{metric}")


def warm_other_scopes(view: View, layer: int | None) -> None:
    """Have the other layer scopes' sweeps measured in the background, so that switching the
    scope picker is a lookup (the first sweep of a scope costs ~0.4 s on max_position).

    The ranks are the grid and the k box's first k (d_k): what each scope shows when first
    picked. Another typed k costs a scope one measurement (~25 ms) when it is picked, rather
    than background work on every k typed. Known values are skipped, so this is cheap to call
    on every run.

    Toy models only: their measure is the task's accuracy on fixed examples, one set of values
    per server and model. A sentence model's measure is the typed pair's similarity, which the
    next keystroke replaces, so measuring its other scopes ahead would mostly be wasted.
    """
    cfg = view.meta.config
    ranks = dissect.rank_grid(cfg.d_model, extra=[cfg.d_k])
    scopes = [scope for scope in (None, *range(cfg.n_layers)) if scope != layer]
    cache = accuracy_cache(view.entry.digest, view.task.name, _model=view.model)
    cache.warm(iv for scope in scopes for iv in dissect.sweep_switches(cfg.d_model, scope, ranks))


@st.cache_data(show_spinner=False, max_entries=16)
def cached_spectrum(digest: str, _model) -> np.ndarray:
    """(L, D) singular values of each layer's learned W_o, per checkpoint."""
    return dissect.singular_values(_model)


def modes_section(view: View, k: int | None) -> None:
    st.caption(t("parts.modes.intro"))
    cfg = view.meta.config
    lang = current()
    layer = switches.layer_picker(
        t("parts.scope"),
        view.meta.config.n_layers,
        "parts_scope",
        t("parts.all_layers", lang=lang),
        lambda x: f"L{x}",
        width=220,
    )
    measured = measure_for(view)
    if measured is None:
        return
    measure, name = measured
    ranks = dissect.rank_grid(cfg.d_model, extra=[] if k is None else [k])
    with st.spinner(t("parts.modes.computing")):
        sweep = dissect.sweep_modes(measure, cfg.d_model, layer, ranks)
    if not view.is_sentence:
        warm_other_scopes(view, layer)
    lang = current()
    scope = t("parts.all_layers") if layer is None else f"L{layer}"
    left, right = st.columns([3, 2])
    with left:
        chart(
            plots.mode_sweep_plot(
                sweep.ranks,
                sweep.rank_values,
                sweep.whole,
                mode_names(lang),
                chosen_k=k,
                title=t("parts.modes.title", what=name, scope=scope),
                x_title=t("parts.modes.x"),
                y_title=name,
            ),
            key="parts_sweep",
        )
    with right:
        sv = cached_spectrum(view.entry.digest, _model=view.model)
        shown = list(range(cfg.n_layers)) if layer is None else [layer]
        chart(
            plots.w_o_spectrum_plot(
                sv[shown],
                title=t("parts.modes.spectrum_title"),
                x_title=t("parts.modes.x"),
                y_title=t("parts.modes.spectrum_y"),
                layer_ids=shown,
                chosen_k=k,
            ),
            key="parts_spectrum",
        )
    values = {mode: f"{value:.3g}" for mode, value in sweep.whole.items()}
    st.markdown(
        md_escape(
            t(
                "parts.modes.summary",
                what=name,
                learned=values["learned"],
                block=values[wo.BLOCK_DIAGONAL],
                identity=values["identity"],
                zero=values["zero"],
            )
        )
    )
    if k is not None:
        st.markdown(md_escape(t("parts.modes.at_k", k=k, value=f"{sweep.at_rank(k):.3g}")))
    st.caption(t("parts.modes.reading"))


# ---- 2. head permutation -----------------------------------------------------------------------


def shuffle_order(key: str, n_heads: int) -> None:
    order = dissect.shuffled_order(n_heads, np.random.default_rng())
    state.set_widget(key, ",".join(str(h) for h in order))


def permutation_section(view: View) -> None:
    st.caption(t("parts.perm.intro"))
    H = view.meta.config.n_heads
    layer = index_picker(t("parts.layer"), view.meta.config.n_layers, "parts_perm_layer", "L")
    example = dissect.example_order(H)
    left, right = st.columns([3, 1], vertical_alignment="bottom")
    typed = left.text_input(
        t("parts.perm.order", last=H - 1),
        value=example,
        key="parts_order",  # no max_chars: a browser drops a longer paste without a word
        help=t("parts.perm.order_help", last=H - 1, example=example),
    )
    right.button(
        t("parts.perm.shuffle"),
        key="parts_shuffle",
        on_click=shuffle_order,
        args=("parts_order", H),
    )
    try:
        order = dissect.parse_order(typed, H)
    except ValueError:
        st.error(md_escape(t("parts.perm.bad_order", last=H - 1, example=example)))
        return
    if order == tuple(range(H)):
        st.info(t("parts.perm.unmoved"))
    text = view.text
    base = trace_for(view, text, NONE)
    shuffled = trace_for(view, text, dissect.permuted(layer, order, False))
    matched = trace_for(view, text, dissect.permuted(layer, order, True))
    check = dissect.permutation_check(base, shuffled, matched)
    with st.container(horizontal=True):
        st.metric(t("parts.perm.shuffled", layer=layer), f"{check.shuffled_attn_out:.2e}")
        st.metric(t("parts.perm.matched", layer=layer), f"{check.matched_attn_out:.2e}")
        st.metric(t("parts.perm.shuffled_out"), f"{check.shuffled_output:.2e}")
        st.metric(t("parts.perm.matched_out"), f"{check.matched_output:.2e}")
    if not view.is_sentence:
        st.code(
            prediction_table(
                [
                    (t("parts.row.answer"), base.answer),
                    (t("parts.row.learned"), base.prediction),
                    (t("parts.row.shuffled"), shuffled.prediction),
                    (t("parts.row.matched"), matched.prediction),
                ],
                base.answer,
                marked_row=2,
            ),
            language=None,
        )
    verdict = "parts.perm.identical" if check.identical else "parts.perm.not_identical"
    st.markdown(md_escape(t(verdict, gap=f"{max(check.matched_output, 0.0):.1e}")))
    st.caption(t("parts.perm.why"))


# ---- 3. pattern override ----------------------------------------------------------------------


def pattern_section(view: View) -> None:
    st.caption(t("parts.pattern.intro"))
    lang = current()
    cfg = view.meta.config
    a, b, c, d = st.columns(4)
    with a:
        layer = index_picker(t("parts.layer"), cfg.n_layers, "parts_pat_layer", "L")
    with b:
        head = index_picker(t("parts.head"), cfg.n_heads, "parts_pat_head", "H")
    with c:
        kind = st.selectbox(
            t("parts.pattern.pattern"),
            [*PATTERNS, COPY],
            format_func=lambda p: t(f"parts.pattern.{p}", lang=lang),
            key="parts_pattern",
        )
    pattern = kind
    if kind == COPY:
        with d:
            source = index_picker(t("parts.pattern.source"), cfg.n_heads, "parts_pat_source", "H")
        if source == head:
            st.info(t("parts.pattern.same_head"))
        pattern = f"{COPY_PREFIX}{source}"
    text = view.text
    base = view.base
    overridden = trace_for(view, text, Interventions(patterns=((layer, head, pattern),)))
    if view.is_sentence:
        if view.text_b is not None:
            sim = similarity(view, text, view.text_b, overridden.interventions)
            with st.container(horizontal=True):
                st.metric(t("parts.pattern.sim_learned"), f"{sim.learned:.3f}")
                st.metric(
                    t("parts.pattern.sim_overridden"),
                    f"{sim.switched:.3f}",
                    delta=f"{sim.switched - sim.learned:+.3f}",
                    delta_color="off",
                )
    else:
        st.code(
            prediction_table(
                [
                    (t("parts.row.answer"), base.answer),
                    (t("parts.row.learned"), base.prediction),
                    (t("parts.row.overridden"), overridden.prediction),
                ],
                base.answer,
            ),
            language=None,
        )
        changed = changed_tokens(base.prediction, overridden.prediction)
        st.caption(t("parts.pattern.changed", n=len(changed), total=len(base.prediction)))
    name = f"L{layer} H{head}"
    left, right = st.columns(2)
    with left:
        chart(
            plots.attention_map(
                base.attn[layer, head],
                base.labels,
                title=t("parts.pattern.own", head=name),
                words=plot_words(),
            ),
            key="parts_pattern_own",
        )
    with right:
        chart(
            plots.attention_map(
                overridden.attn[layer, head],
                base.labels,
                title=t("parts.pattern.given", head=name),
                words=plot_words(),
            ),
            key="parts_pattern_given",
        )
    W = cached_w_o(view.entry.digest, tuple(base.w_o_modes), _model=view.model)  # (L, D, D)
    before = wo.head_contributions(base.z[layer], W[layer])[head]  # (T, D)
    after = wo.head_contributions(overridden.z[layer], W[layer])[head]
    left, right = st.columns(2)
    with left:
        chart(
            plots.activation_map(
                before,
                base.labels,
                title=t("parts.pattern.term_before", head=name),
                words=plot_words(),
            ),
            key="parts_term_before",
        )
    with right:
        chart(
            plots.activation_map(
                after,
                base.labels,
                title=t("parts.pattern.term_after", head=name),
                words=plot_words(),
            ),
            key="parts_term_after",
        )
    st.caption(t("parts.pattern.reading"))


# ---- 4. two inputs ------------------------------------------------------------------------------


def one_token_changed(text: str, alphabet: str) -> str:
    """text with its middle character replaced by the next one of the alphabet (a default B)."""
    if not text or not alphabet:
        return text
    i = len(text) // 2
    j = alphabet.find(text[i])
    return text[:i] + alphabet[(j + 1) % len(alphabet)] + text[i + 1 :]


def diff_section(view: View) -> None:
    st.caption(t("parts.diff.intro"))
    text = view.text
    default = "" if view.is_sentence else one_token_changed(text, view.task.alphabet)
    typed = st.text_input(
        t("parts.diff.second"),
        value=default,
        key="parts_seq_b",  # no max_chars: a browser drops a longer paste without a word
        help=t("parts.diff.second_help"),
    )
    if not typed.strip():
        st.info(t("parts.diff.type_b"))
        return
    try:
        text_b = view.task.validate(typed)
    except ValueError as e:
        st.error(md_escape(t("parts.diff.bad_b", why=refusal(e))))
        return
    if text_b == text:
        st.error(t("parts.diff.same"))
        return
    a = view.trace
    b = trace_for(view, text_b, view.interventions)
    if len(a.labels) != len(b.labels):
        st.error(t("parts.diff.lengths", a=len(a.labels), b=len(b.labels)))
        return
    W = cached_w_o(view.entry.digest, tuple(a.w_o_modes), _model=view.model)
    try:
        diff = diff_inputs(a, b, W)
    except ValueError as e:  # a pair diff_inputs refuses for a reason not caught above
        st.error(md_escape(str(e)))
        return
    changed = ", ".join(a.labels[i] for i in diff.positions) or "-"
    st.markdown(md_escape(t("parts.diff.where", n=len(diff.positions), tokens=changed)))
    layer = index_picker(t("parts.layer"), a.n_layers, "parts_diff_layer", "L")
    chart(
        plots.attention_diff_grid(
            diff.attn[layer],
            a.labels,
            layer,
            title=t("parts.diff.attn_title", layer=layer),
            words=plot_words(),
        ),
        key="parts_diff_attn",
    )
    left, right = st.columns(2)
    with left:
        chart(
            plots.activation_map(
                diff.concat[layer],
                a.labels,
                n_heads=a.n_heads,
                title=t("parts.diff.concat_title", layer=layer),
                words=plot_words(),
            ),
            key="parts_diff_concat",
        )
    with right:
        chart(
            plots.activation_map(
                diff.attn_out[layer],
                a.labels,
                title=t("parts.diff.out_title", layer=layer),
                words=plot_words(),
            ),
            key="parts_diff_out",
        )
    chart(
        plots.head_change_map(
            diff.head_terms[layer],
            a.labels,
            title=t("parts.diff.terms_title", layer=layer),
            value_title=t("parts.diff.terms_value"),
            words=plot_words(),
        ),
        key="parts_diff_terms",
    )
    st.caption(t("parts.diff.reading"))


# ---- 5. predict, then reveal -------------------------------------------------------------------


@st.cache_resource(show_spinner=False)
def class_tally() -> Tally:
    """The guesses of every session of this server process (anonymous, capped: tfviz.tally)."""
    return Tally()


def question_label(choice: str, lang: str) -> str:
    """A question picker option: a W_o mode's name, or "rank k" (k typed in the box)."""
    if choice == switches.RANK:
        return t("parts.predict.rank_k", lang=lang)
    return w_o_label(choice, lang)


def question_mode(choice: str, k: int | None) -> str | None:
    """The W_o mode a question is about; None for the rank question while k is refused."""
    if choice != switches.RANK:
        return choice
    return None if k is None else dissect.rank_mode(k)


def predict_section(view: View, k: int | None) -> None:
    st.caption(t("parts.predict.intro"))
    lang = current()
    choice = st.selectbox(
        t("parts.predict.about"),
        QUESTION_MODES,
        format_func=functools.partial(question_label, lang=lang),
        key="parts_question",
    )
    mode = question_mode(choice, k)
    if mode is None:
        st.info(t("parts.predict.need_k"))
        return
    label = w_o_label(mode)
    if view.is_sentence:
        question = t("parts.predict.q_sentence", mode=label, drop=f"{SIMILARITY_DROP:.2f}")
    elif view.task.metric == "mae":
        question = t("parts.predict.q_error", mode=label)
    else:
        what = t(f"parts.metric.{view.task.metric}")
        question = t(
            "parts.predict.q_toy", mode=label, what=what, drop=f"{100 * ACCURACY_DROP:.0f}"
        )
    st.markdown(f"**{md_escape(question)}**")
    qid = f"{view.entry.key}|{mode}"  # the same question for everyone on this model
    guesses = state.PARTS_GUESSES.setdefault({})
    tally = class_tally()
    if qid not in guesses:
        guess = st.radio(
            t("parts.predict.your_guess"),
            CHOICES,
            index=None,
            format_func=lambda c: t(f"parts.predict.{c}", lang=lang),
            key=f"parts_guess_{qid}",
            horizontal=True,
        )
        if not st.button(t("parts.predict.commit"), key="parts_commit", type="primary"):
            st.caption(t("parts.predict.hidden"))
            teacher_reset(tally)
            return
        if guess is None:
            st.warning(t("parts.predict.pick_first"))
            return
        try:
            tally.add(qid, guess)
        except ValueError as e:  # the tally's cap on answers: a message, the guess kept
            st.warning(md_escape(str(e)))
        guesses[qid] = guess
    reveal(view, mode, guesses[qid], lang)
    counts = tally.counts(qid)
    chart(
        plots.tally_bars(
            [t(f"parts.predict.{c}") for c in CHOICES],
            [counts.get(c, 0) for c in CHOICES],
            title=t("parts.predict.tally_title", n=sum(counts.values())),
            y_title=t("parts.predict.tally_y"),
        ),
        key="parts_tally",
    )
    st.caption(t("parts.predict.anonymous"))
    teacher_reset(tally)


def reveal(view: View, mode: str, guess: str, lang: str) -> None:
    """The answer to the question about mode, and whether the guess was right."""
    iv = Interventions(w_o=mode)
    if view.is_sentence:
        a, b = PARAPHRASE_PAIR
        sim = similarity(view, a, b, iv)
        before, after = sim.learned, sim.switched
        fell = before - after > SIMILARITY_DROP
        shown = t("parts.predict.sim_result", before=f"{before:.3f}", after=f"{after:.3f}")
    else:
        metric = view.task.metric
        before, after = accuracy_for(view, NONE)[metric], accuracy_for(view, iv)[metric]
        # An error (MAE) has no fixed scale: its question asks whether it at least doubles.
        fell = after >= 2 * before if metric == "mae" else before - after > ACCURACY_DROP
        shown = t(
            "parts.predict.toy_result",
            what=t(f"parts.metric.{metric}"),
            before=f"{before:.3g}",
            after=f"{after:.3g}",
        )
    answer = "yes" if fell else "no"
    st.markdown(md_escape(shown))
    said = t(f"parts.predict.{guess}", lang=lang)
    if guess == answer:
        st.success(t("parts.predict.right", guess=said))
    else:
        st.warning(t("parts.predict.wrong", guess=said, answer=t(f"parts.predict.{answer}")))


def set_reset_step(step: str | None, tally: Tally | None = None) -> None:
    """A reset button's callback: move to step; with a tally, empty it (confirmed)."""
    if tally is not None:
        tally.reset()
        state.PARTS_GUESSES.set({})  # this session may guess again, like the class
    state.PARTS_RESET_STEP.set(step)


def teacher_reset(tally: Tally) -> None:
    """The teacher's reset of the whole tally, with a confirmation step."""
    step = state.PARTS_RESET_STEP.get()
    if step == "confirm":
        st.warning(t("parts.predict.reset_confirm"))
        with st.container(horizontal=True):
            st.button(
                t("parts.predict.reset_yes"),
                key="parts_reset_yes",
                type="primary",
                on_click=set_reset_step,
                args=("done", tally),
            )
            st.button(
                t("parts.predict.reset_no"),
                key="parts_reset_no",
                on_click=set_reset_step,
                args=(None,),
            )
        return
    if step == "done":
        st.success(t("parts.predict.reset_done"))
        state.PARTS_RESET_STEP.set(None)
    st.button(
        t("parts.predict.reset"),
        key="parts_reset",
        help=t("parts.predict.reset_help"),
        on_click=set_reset_step,
        args=("confirm",),
    )
