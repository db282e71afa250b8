"""Learning from use: the labelled examples toolpath learns from (:mod:`.examples`), and what it
learns from them. Nothing here runs a language model: what is learned is search data (phrasings as
vectors, a linear query adapter) and prerequisite habits, written as a catalog overlay a person can
review.
"""
