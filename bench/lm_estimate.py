"""The Train tab's language model: the default job's time, and its "about N left" against the truth.

Runs the default LanguageWork job (tfviz.serve.work.LanguageSpec's defaults, or --steps) once,
through a JobManager in this process, as the app does: torch on one thread, the bundled corpus,
the model saved into a temporary folder. The job's state is polled every 20 ms; the time left it
says (JobState.seconds_left, tfviz.serve.jobs.estimate_left: measured on the job's own first steps)
is read when the first --at of the steps are done (and when it is first said), and compared with
the time the remaining steps then actually took. Prints the seconds per step, the training time,
the whole job's time (the corpus read, measuring and saving too), the validation loss and
induction score the folder records, and a short sample of the model's text (temperature 0.8).

Target: |actual / estimated - 1| <= 0.30 at 10% of the steps.

Usage: python -m bench.lm_estimate [--steps N] [--at 0.1] [--threads 1] [--rounds 1]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import torch

from tfviz import hf
from tfviz.serve import jobs, work
from tfviz.training import language

POLL_S = 0.02


def sample(folder: Path, prompt: str, n: int = 200, temperature: float = 0.8) -> str:
    """n characters the saved model writes after prompt, sampled (seed 0)."""
    loaded = hf.open_folder(folder)
    vocab = language.corpus_vocabulary()
    ids = [int(i) for i in vocab.encode(prompt)]
    context = loaded.model.config.max_len
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for _ in range(n):
            logits = loaded.model(torch.tensor([ids[-context:]]), trace=False).logits[0, -1]
            probs = torch.softmax(logits[: vocab.end_id] / temperature, -1)
            ids.append(int(torch.multinomial(probs, 1, generator=g)))
    return vocab.decode(ids)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=work.LM_STEPS)
    p.add_argument("--at", type=float, default=0.1, help="share of the steps done when read")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--rounds", type=int, default=1, help="jobs run one after another")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {args.threads} thread(s)")
    for round_ in range(args.rounds):
        print(f"---- round {round_ + 1} of {args.rounds}")
        one_job(args)


def one_job(args) -> None:
    manager = jobs.JobManager(max_jobs=1, max_queue=0)
    with tempfile.TemporaryDirectory() as tmp:
        spec = work.LanguageSpec(name="bench", steps=args.steps)
        start = time.monotonic()
        job = manager.submit(work.LanguageWork(spec, Path(tmp), device="cpu"))
        first = at = None  # (clock, steps done, seconds left) when first said / at --at
        trained = None
        while not job.wait(POLL_S):
            snap = job.state()
            now = time.monotonic()
            if snap.seconds_left is not None and first is None:
                first = (now, snap.done, snap.seconds_left)
            if at is None and snap.seconds_left is not None and snap.done >= args.at * args.steps:
                at = (now, snap.done, snap.seconds_left)
            if trained is None and snap.done >= snap.total:
                trained = now
        end = time.monotonic()
        snap = job.state()
        assert snap.status == jobs.DONE, snap.message
        trained = trained or end
        result: work.LanguageResult = snap.result
        record = result.record
        print(f"spec: {spec}")
        print(
            f"training: {record['seconds']:.1f} s for {args.steps} steps "
            f"({record['seconds'] / args.steps * 1000:.1f} ms a step); whole job "
            f"{end - start:.1f} s (corpus, measuring and saving included)"
        )
        for label, read in (("first said", first), (f"at {args.at:.0%}", at)):
            if read is None:
                print(f"{label}: no estimate was said")
                continue
            clock, done, left = read
            actual = trained - clock
            print(
                f"{label}: step {done}, {clock - start:.1f} s in: estimated {left:.1f} s left, "
                f"actual {actual:.1f} s; actual / estimated = {actual / left:.3f}"
            )
        best = record["induction_best"]
        print(
            f"validation loss {result.valid_loss:.4f} nats/char; best induction score "
            f"{result.induction:.4f} (L{best['layer']}H{best['head']}); in-context drop "
            f"{result.in_context_drop:.3f}"
        )
        print(repr(sample(Path(result.path), "ROMEO:\nBut soft, what light")))


if __name__ == "__main__":
    main()
