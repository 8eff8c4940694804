"""Train models from the command line, with a progress bar.

`python -m tfviz.cli.train --task reverse --out my_reverse.safetensors` trains one model with the
same defaults as the app's Train tab (the task's first-run recipe: seconds, not minutes), or with
its bundled model's longer recipe given `--bundled-recipe`; flags override either (`--causal`: the
form's causal box). `--all` rebuilds every bundled model from tfviz/training/recipes.py and
rewrites models/README.md. `--language NAME` trains a bundled language model's recipe on the
bundled corpus (tfviz/training/language.py) into its folder. The loop itself lives in
tfviz/training/train.py.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

from tfviz.core import modes
from tfviz.core.tasks import get_task
from tfviz.messages import say
from tfviz.training.train import StepInfo, train


def _train_one(name: str, out: Path, recipe: dict, quiet: bool = False) -> dict:
    from tqdm import tqdm

    from tfviz.training.checkpoint import save_checkpoint
    from tfviz.training.evaluate import evaluate

    task = get_task(recipe["task"])
    config = task.model_config(**recipe.get("sizes", {}))
    kwargs = {
        k: recipe[k]
        for k in ("steps", "batch_size", "lr", "seed", "w_o", "min_len", "max_len", "schedule")
        if k in recipe
    }
    bar = tqdm(
        total=kwargs.get("steps", 1000),
        desc=name,
        file=sys.stderr,
        disable=quiet,
        dynamic_ncols=True,
    )

    def show(info: StepInfo) -> None:
        bar.update(1)
        if info.step % 10 == 0 or info.step == info.steps:
            bar.set_postfix(loss=f"{info.loss:.4f}")

    model, history = train(task, config, on_step=show, **kwargs)
    bar.close()
    metrics = evaluate(model, task)
    if "eval_len" in recipe:  # seed 002's length, where the sum target is set: measure it too
        n = recipe["eval_len"]
        at = evaluate(model, task, min_len=n, max_len=n)
        metrics.update({f"{k}_len{n}": v for k, v in at.items() if k not in ("min_len", "max_len")})
    save_checkpoint(out, model, task.name, history, metrics)
    return metrics


def _train_language(name: str, out: Path, recipe: dict, quiet: bool = False) -> dict:
    """Train a language model on the bundled corpus and write its folder; returns its record."""
    from tqdm import tqdm

    from tfviz.training import language

    vocab, train_ids, valid_ids, manifest = language.bundled_corpus()
    sizes = {k: recipe[k] for k in language.SIZE_KEYS if k in recipe}
    config = language.language_config(vocab, recipe["context"], **sizes)
    bar = tqdm(total=recipe["steps"], desc=name, file=sys.stderr, disable=quiet,
               dynamic_ncols=True)  # fmt: skip

    def show(info: StepInfo) -> None:
        bar.update(1)
        if info.step % 10 == 0 or info.step == info.steps:
            bar.set_postfix(loss=f"{info.loss:.4f}")

    keys = language.TRAIN_KEYS
    model, history = language.train_language_model(
        train_ids, config, on_step=show, device="cpu", **{k: recipe[k] for k in keys if k in recipe}
    )
    bar.close()
    record = language.measure_record(model, vocab, valid_ids, history, manifest)
    language.save_language_folder(out, model, vocab, record, language.model_card(name, record))
    return record


def main(argv: list[str] | None = None) -> int:
    from tfviz.training.recipes import RECIPES, first_run_recipe, write_models_readme

    p = argparse.ArgumentParser(
        prog="python -m tfviz.cli.train", description=__doc__.split("\n")[0]
    )
    p.add_argument("--task", help="task name (the Train tab's defaults for it)")
    p.add_argument("--out", type=Path, help="where to write the .safetensors checkpoint")
    p.add_argument("--steps", type=int)
    p.add_argument("--lr", type=float)
    p.add_argument("--batch-size", type=int)
    p.add_argument("--seed", type=int)
    p.add_argument("--w-o", choices=modes.SWITCH)
    p.add_argument(
        "--causal",
        action="store_true",
        help="a causal toy model (each token reads only earlier ones; the answer is read at the "
        "last token): tasks with one answer per sequence only",
    )
    p.add_argument(
        "--language",
        metavar="NAME",
        help="train a bundled language model's recipe (tfviz.training.language.LANGUAGE_RECIPES)"
        " on the bundled corpus and write its folder (default models/language/NAME)",
    )
    p.add_argument("--all", action="store_true", help="rebuild every bundled model in models/")
    p.add_argument(
        "--bundled-recipe",
        action="store_true",
        help="train --task with its bundled model's recipe instead of the Train tab's defaults",
    )
    p.add_argument("--models", type=Path, default=Path(__file__).resolve().parents[2] / "models")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    args = p.parse_args(argv)
    # One thread: these models are too small to gain from more, and two processes each
    # spinning two threads on a 2-core machine slow to a crawl (seen here: 60 -> 1.4 steps/s).
    torch.set_num_threads(args.threads)
    if args.all:
        results = {}
        for name, recipe in RECIPES.items():
            results[name] = _train_one(name, args.models / f"{name}.safetensors", recipe)
            print(f"{name}: {results[name]}", flush=True)
        write_models_readme(args.models)
        return 0
    if args.language:
        from tfviz.training.language import LANGUAGE_RECIPES

        if args.language not in LANGUAGE_RECIPES:
            p.error(f"--language: one of {sorted(LANGUAGE_RECIPES)}")
        recipe = dict(LANGUAGE_RECIPES[args.language])
        for key in ("steps", "lr", "batch_size", "seed", "w_o"):
            if getattr(args, key) is not None:
                recipe[key] = getattr(args, key)
        out = args.out or args.models / "language" / args.language
        record = _train_language(args.language, out, recipe)
        print(f"{args.language}: validation {record['valid_loss']:.4f} nats/char, "
              f"{record['seconds']:.0f} s -> {out}")  # fmt: skip
        return 0
    if not args.task or not args.out:
        p.error("give --task and --out, --language, or --all")
    if args.bundled_recipe:
        recipe = dict(RECIPES.get(args.task, {"task": args.task}))
    else:
        recipe = first_run_recipe(args.task)
    for key in ("steps", "lr", "batch_size", "seed", "w_o"):
        if getattr(args, key) is not None:
            recipe[key] = getattr(args, key)
    if args.causal:
        if not get_task(args.task).learns_causally:
            p.error(f"--causal: {say('causal_per_token').english()}")
        recipe["sizes"] = {**recipe.get("sizes", {}), "causal": True}
    metrics = _train_one(args.task, args.out, recipe)
    print(f"{args.task}: {metrics} -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
