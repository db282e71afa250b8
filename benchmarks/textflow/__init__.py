"""textflow: a small type-level catalog for the data-flow benchmark (``benchmarks/bench_dataflow.py``).

One state type, ``textflow.text``, flows through several tools that each take a text and return a
text (expand, simplify, translate, summarize), so a chain of them is wired by state alone; a text can
be read from a file, given a title (which ``save_text`` takes by its name), saved to a file (a
``role: output`` path), or read aloud into a WAV file. The transforms are deterministic
and leave visible marks, so a run shows which step received which text:

- expand appends the sentence :data:`textflow.tools.EXPANSION`;
- simplify lowercases and replaces long words (``utilize`` → ``use``);
- translate replaces words from a small dictionary and prefixes ``[fr]`` (or ``[de]``, ``[es]``);
- summarize keeps the first sentence(s) and prefixes ``Summary:``.
"""
