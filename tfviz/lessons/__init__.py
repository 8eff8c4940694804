"""The numbers behind the guided lessons: each claim of the seed articles, computed, not pictured.

The Lessons tab (tfviz/ui/views/lessons/) walks a student through the three articles' claims; this
package computes what each step shows, without Streamlit, so every number is tested here. One
module per part:

    concat      1. Concatenation is not integration (seed 000): `two_head_example` runs the
                article's 2-head example (head outputs [1, 0] and [0, 2], a 4x4 W_o, attn_out =
                concat · W_o as the article writes it) through W_o and through the identity
                ("no W_o") and says which heads each output dimension draws on;
                `weight_dependency` gives the same map for a trained model's real W_o, from its
                weights alone. A typed number is refused with LessonInputError (a
                tfviz.refusal.Refusal).
    projection  2. One big projection then view/transpose equals H per-head projections (seed
                004): `projection_equivalence` computes both on a live model and returns the
                largest difference.
    recipe      3. The digit-sum model in its original setting (seed 002): `RecipeWork` trains a
                bundled recipe (tfviz/training/recipes.py, `sum_seed`) as a job of the app's one
                JobManager (tfviz.serve.jobs) and keeps the model in memory; `predict` reads the
                answer for typed digits.
    switch      4. Switch W_o off and watch the outputs change: `w_o_switch`.
    decoder     5-8. Inside a decoder, the bundled character language model: the causal mask, a
                previous-token head, an induction head on a repeated sentence, W_o switched off
                in layer 0 (measured on the model given: nothing here knows its weights).

The algebra of W_o is tfviz.core.wo's (head_blocks, head_contributions, head_energy): nothing here
re-derives it. Dimensions: B batch, T tokens, H heads, d_k per head, D = H * d_k.
This module only re-exports the names callers use (`lessons.two_head_example(...)`).
"""

from tfviz.lessons.concat import (
    ARTICLE_W_O,
    ARTICLE_Z0,
    ARTICLE_Z1,
    DRAWN_ON,
    MAX_ABS,
    HeadExample,
    LessonInputError,
    head_example,
    heads_drawn_on,
    model_dependency,
    two_head_example,
    weight_dependency,
)
from tfviz.lessons.decoder import (
    KEPT_SHARE,
    RANDOM_LETTERS,
    CausalRows,
    PreviousToken,
    RepeatedSentence,
    causal_rows,
    head_kept,
    previous_token_head,
    previous_token_line,
    random_letters,
    repeated_sentence,
)
from tfviz.lessons.projection import ProjectionCheck, projection_equivalence
from tfviz.lessons.recipe import (
    EVAL_N,
    LESSON_RECIPE,
    AttentionPair,
    RecipeResult,
    RecipeSpec,
    RecipeWork,
    attention_pair,
    predict,
)
from tfviz.lessons.switch import SwitchResult, w_o_switch

__all__ = [
    "ARTICLE_W_O",
    "ARTICLE_Z0",
    "ARTICLE_Z1",
    "DRAWN_ON",
    "EVAL_N",
    "KEPT_SHARE",
    "LESSON_RECIPE",
    "MAX_ABS",
    "RANDOM_LETTERS",
    "AttentionPair",
    "CausalRows",
    "HeadExample",
    "LessonInputError",
    "PreviousToken",
    "ProjectionCheck",
    "RecipeResult",
    "RecipeSpec",
    "RecipeWork",
    "RepeatedSentence",
    "SwitchResult",
    "attention_pair",
    "causal_rows",
    "head_example",
    "head_kept",
    "heads_drawn_on",
    "model_dependency",
    "predict",
    "projection_equivalence",
    "previous_token_head",
    "previous_token_line",
    "random_letters",
    "repeated_sentence",
    "two_head_example",
    "w_o_switch",
    "weight_dependency",
]
