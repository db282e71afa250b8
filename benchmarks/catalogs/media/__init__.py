"""media: a small type-level catalog of multimedia tools for ``benchmarks/bench_requests.py``.

States are kinds of media (``media.image``, ``media.audio``, ``media.video``, ``media.text``,
``media.url``), so requests are told apart by the tools' affordances and by direction (image to
text, text to image). The tools (:mod:`media.tools`) return placeholders: the benchmark only plans.
"""
