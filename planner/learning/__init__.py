"""Learning from use: the labelled examples toolpath learns from (:mod:`.examples`), and what it
learns from them (:mod:`.overlay_learning`, measured by :mod:`.evaluation`). Nothing here runs a
language model: what is learned is search data (phrasings as vectors, a linear query adapter) and
prerequisite habits, written as a catalog overlay a person can review. ``learn`` and
``evaluate_learning`` are exported by the ``toolpath.planner`` façade (this file imports nothing).
"""
