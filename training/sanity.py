"""Is the held-out evaluation worth anything? Checked before fitting, so a degenerate split
fails with what to change in the spec instead of a gate passed on noise.

A 16-row test split holding one class made the majority baseline score 0.0 and the model 1.0,
and the gate passed: the split, not the model, decided the result.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from etl.errors import PipelineError


class EvaluationSplitError(PipelineError):
    """An eval or test split too small, or missing classes that train has."""


def check_splits(manifest: dict[str, Any], labels: dict[str, np.ndarray],
                 min_examples: int) -> None:
    """Raise EvaluationSplitError naming split sizes, classes and the spec fields to change.

    labels: the stored labels of the eval and test splits (classification) or any values.
    """
    sizes = {s: int(manifest["splits"][s]["num_examples"]) for s in ("train", "eval", "test")}
    label = manifest["schema"]["label"]
    problems = [f"{s} holds {sizes[s]} examples (fewer than {min_examples})"
                for s in ("eval", "test") if sizes[s] < min_examples]
    classes = ""
    if label.get("task", "binary") != "regression":
        names = [str(n) for n in label.get("names") or range(int(label.get("classes", 2)))]
        train = {int(k) for k, v in (manifest["statistics"].get("label_counts") or {}).items()
                 if int(v) > 0}
        counts = {s: np.bincount(labels[s].astype(np.int64), minlength=len(names))
                  for s in ("eval", "test")}
        for s, c in counts.items():
            missing = [names[i] for i in sorted(train) if i < len(c) and c[i] == 0]
            if missing:
                problems.append(f"{s} lacks class(es) {missing} that train has")
        classes = "; classes per split: " + "; ".join(
            f"{s} {dict(zip(names, map(int, c), strict=True))}" for s, c in counts.items())
    if problems:
        raise EvaluationSplitError(
            f"{manifest['dataset']}/{manifest['version']}: the held-out evaluation would mean "
            f"nothing: " + "; ".join(problems) + f" (split sizes {sizes}{classes}). Change the "
            f"spec: split.stratify: true spreads every class over the splits; split.by: row "
            f"if the key is not unique; larger eval/test shares in split.fractions; or "
            f"training.min_eval_examples. Nothing was trained.")
