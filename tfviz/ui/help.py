"""The prose the views show to explain each method: its paper, what it computes, its caveats.

The texts live in the language catalogue (tfviz/locales, keys "help.<topic>"); the views read
them only through HELP, which looks each one up in the student's language when it is read. Each
entry stands alone: a view shows whole entries, never a sentence cut out of a longer one, so a
translation needs no sentence splitting.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from tfviz.ui.i18n import t

TOPICS = (
    "norm_attention",
    "norm_attention_summed",
    "attention_rollout",
    "head_importance",
    "accuracy_keeping_top_k",
    "compare_ablation",
    # Shown alone above the ablation numbers, so it says in full what the mistake is.
    "compare_ablation_mistake",
    "ov_circuits",
    "composition_scores",
    "w_o_mixing",
)


class HelpTexts(Mapping[str, str]):
    """topic -> its explanation in the current language (read at lookup, never stored, so a
    language switch changes every text at once)."""

    def __getitem__(self, topic: str) -> str:
        if topic not in TOPICS:
            raise KeyError(topic)
        return t(f"help.{topic}")

    def __iter__(self) -> Iterator[str]:
        return iter(TOPICS)

    def __len__(self) -> int:
        return len(TOPICS)


HELP = HelpTexts()
