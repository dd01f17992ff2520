"""Volcano's queue hierarchy annotations, read by drf's hierarchical mode (``enableHierarchy``).

A Queue names its place in a tree of weighted nodes with two annotations of equal length::

    volcano.sh/hierarchy:         root/eng/dev
    volcano.sh/hierarchy-weights: 100/50/50

Volcano's admission webhook refuses lengths that differ and weights that are not positive numbers,
and puts ``root`` (weight 1) in front of a path that does not start with it; :func:`queue_hierarchy`
does the same, so the manifest loader refuses what the webhook would and drf reads what the
webhook would have stored.  (The webhook's check across queues — one queue's path may not lie under
another's — needs every queue at once and is not made here.)
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from proto.errors import InputError

HIERARCHY_ANNOTATION = "volcano.sh/hierarchy"
HIERARCHY_WEIGHTS_ANNOTATION = "volcano.sh/hierarchy-weights"


def queue_hierarchy(annotations: Mapping[str, str]) -> tuple[tuple[str, ...], tuple[float, ...]] | None:
    """The queue's path from the root and each level's weight, or None when it sets neither annotation.

    Raises InputError naming the problem.
    """
    path_text = annotations.get(HIERARCHY_ANNOTATION, "")
    weights_text = annotations.get(HIERARCHY_WEIGHTS_ANNOTATION, "")
    if not path_text and not weights_text:
        return None
    path = path_text.split("/")
    weight_texts = weights_text.split("/")
    if len(path) != len(weight_texts):
        raise InputError(f"{HIERARCHY_ANNOTATION} {path_text!r} has {len(path)} levels but "
                         f"{HIERARCHY_WEIGHTS_ANNOTATION} {weights_text!r} has {len(weight_texts)}; they must match")
    if any(not part for part in path):
        raise InputError(f"{HIERARCHY_ANNOTATION} {path_text!r}: a level has an empty name")
    weights = []
    for text in weight_texts:
        try:
            weight = float(text)
        except ValueError:
            raise InputError(f"{HIERARCHY_WEIGHTS_ANNOTATION} {weights_text!r}: {text!r} is not a number") from None
        if not weight > 0 or not math.isfinite(weight):
            raise InputError(f"{HIERARCHY_WEIGHTS_ANNOTATION} {weights_text!r}: {text!r} must be a positive number")
        weights.append(weight)
    if not path_text.startswith("root"):  # as Volcano's mutating webhook (a prefix test, as there)
        path, weights = ["root", *path], [1.0, *weights]
    return tuple(path), tuple(weights)
