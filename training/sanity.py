"""Can the held-out evaluation say anything? Checked before fitting, so a split that cannot
be evaluated fails with what to change in the spec instead of a verdict decided by noise.

A 16-row test split holding one class made the majority baseline score 0.0 and the model 1.0:
the split, not the model, decided the result. Only what cannot be evaluated is refused: a test
split under ``min_examples`` rows (``training.config.DEFAULT_MIN_EVAL_EXAMPLES`` says why 20),
a test split missing a class that train has, or an empty eval split. A small table above that
is trained, and its verdict carries intervals (``training.judge.evaluate``, ``training.judge.gate``).
"""

from __future__ import annotations

import math

import numpy as np

from etl.errors import PipelineError
from etl.versions import Manifest


class EvaluationSplitError(PipelineError):
    """A test split too small or missing classes that train has, or no eval rows."""


def check_splits(manifest: Manifest, labels: dict[str, np.ndarray],
                 min_examples: int) -> None:
    """Raise EvaluationSplitError naming split sizes, classes and the spec fields to change.

    labels: the stored labels of the test split (classification) or any values; ``eval``
    too where given (its classes are only reported).
    """
    sizes = {s: int(manifest.splits[s].num_examples) for s in ("train", "eval", "test")}
    total, label = sum(sizes.values()), manifest.schema["label"]
    problems, fixes = [], []
    if sizes["test"] < min_examples:
        share = math.ceil(100 * min_examples / max(total, 1)) / 100
        problems.append(f"test holds {sizes['test']} examples (fewer than {min_examples})")
        fixes.append(f"a test share of at least {share:.2f} in split.fractions "
                     f"({min_examples} of {total} rows)" if share < 0.5 else
                     f"more rows: {total} rows cannot spare {min_examples} for the test split")
    if sizes["eval"] < 1:
        problems.append("eval holds no examples (early stopping watches it)")
        fixes.append("an eval share in split.fractions")
    classes = ""
    if label.get("task", "binary") != "regression":
        names = [str(n) for n in label.get("names") or range(int(label.get("classes", 2)))]
        train = {int(k) for k, v in (manifest.statistics.get("label_counts") or {}).items()
                 if int(v) > 0}
        counts = {s: np.bincount(labels[s].astype(np.int64), minlength=len(names))
                  for s in ("eval", "test") if s in labels}
        missing = [names[i] for i in sorted(train) if i < len(counts["test"])
                   and counts["test"][i] == 0]
        if missing:
            problems.append(f"test lacks class(es) {missing} that train has")
            fixes.append("split.stratify: true spreads every class over the splits; split.by: "
                         "row if the key is not unique")
        classes = "; classes per split: " + "; ".join(
            f"{s} {dict(zip(names, map(int, c), strict=True))}" for s, c in counts.items())
    if problems:
        raise EvaluationSplitError(
            f"{manifest.dataset}/{manifest.version}: the held-out evaluation would mean "
            f"nothing: " + "; ".join(problems) + f" (split sizes {sizes}{classes}). Change the "
            f"spec: " + "; ".join(fixes) + "; or training.min_eval_examples. Nothing was "
            "trained.")
