"""Learning from use: the labelled examples toolpath learns from (:mod:`.examples`), and what it
learns from them (:func:`learn`, :mod:`.overlay_learning`; measured by :mod:`.evaluation`). Nothing
here runs a language model: what is learned is search data (phrasings as vectors, a linear query
adapter) and prerequisite habits, written as a catalog overlay a person can review.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from toolpath.lazy import lazy_exports

if TYPE_CHECKING:
    from toolpath.planner.learning.evaluation import EvaluationReport, evaluate_learning
    from toolpath.planner.learning.examples import ExamplesError, LabelledExample, read_examples
    from toolpath.planner.learning.overlay_learning import LearnError, LearnReport, learn

_HOME = {
    "EvaluationReport": "toolpath.planner.learning.evaluation",
    "evaluate_learning": "toolpath.planner.learning.evaluation",
    "ExamplesError": "toolpath.planner.learning.examples",
    "LabelledExample": "toolpath.planner.learning.examples",
    "LearnError": "toolpath.planner.learning.overlay_learning",
    "LearnReport": "toolpath.planner.learning.overlay_learning",
    "learn": "toolpath.planner.learning.overlay_learning",
    "read_examples": "toolpath.planner.learning.examples",
}

__all__ = sorted(_HOME)
__getattr__ = lazy_exports(__name__, _HOME, globals())
