"""Output caps: a capped stream is never longer than its cap, truncation marker included."""

from hypothesis import given, settings
from hypothesis import strategies as st

from toolpath.kernel.kernels.output import CappedText, CellOutput, OutputLimits, cap


@settings(max_examples=500, deadline=None)
@given(chunks=st.lists(st.text(max_size=300), max_size=20), limit=st.integers(min_value=0, max_value=400))
def test_a_capped_stream_never_exceeds_its_cap_and_keeps_head_and_tail(chunks, limit):
    capped = CappedText(limit)
    for chunk in chunks:
        capped.append(chunk)
    whole, text = "".join(chunks), capped.text()
    assert len(text) <= limit
    if len(whole) <= limit:
        assert text == whole and not capped.truncated
    else:
        assert capped.truncated
        head, _, tail = text.partition("\n... [")
        if tail:  # a cap too small for the marker keeps the head alone
            assert whole.startswith(head)
            dropped, _, kept_tail = tail.partition(" characters truncated] ...\n")
            assert whole.endswith(kept_tail)
            assert int(dropped.replace(",", "")) == len(whole) - len(head) - len(kept_tail)


def test_the_cap_counts_the_marker():
    text, cut = cap("x" * 100_000, 1_000)
    assert cut and 990 <= len(text) <= 1_000 and "characters truncated" in text


def test_every_stream_of_a_cell_result_keeps_its_cap():
    output = CellOutput(OutputLimits(max_output_chars=500))
    output.add("stream", {"name": "stdout", "text": "o" * 5_000})
    output.add("stream", {"name": "stderr", "text": "e" * 5_000})
    output.add("execute_result", {"data": {"text/plain": "r" * 5_000}})
    output.add("error", {"ename": "ValueError", "evalue": "v" * 5_000, "traceback": ["t" * 5_000]})
    result = output.build("error")
    assert all(490 <= len(text) <= 500 for text in (result.stdout, result.stderr, result.result, result.error["evalue"], result.error["traceback"]))
    assert set(result.truncated) == {"stdout", "stderr", "result", "evalue", "traceback"}


def test_thousands_of_dropped_images_are_named_briefly_and_type_names_are_capped():
    import base64

    output = CellOutput(OutputLimits(max_output_chars=100, max_images_per_cell=2))
    for _ in range(3_000):
        output.add("display_data", {"data": {"image/png": base64.b64encode(b"\x89PNG").decode()}})
    output.add("error", {"ename": "E" * 5_000, "evalue": "x", "traceback": []})
    result = output.build("error")
    assert len(result.images) == 2 and len(result.dropped_images) == 11
    assert result.dropped_images[-1] == "2,988 more images dropped"
    assert len(result.error["ename"]) <= 100


def test_a_kernel_sends_tables_cut_with_their_shape_beside_their_whole_text():
    from toolpath.kernel import CodeMode

    with CodeMode(pool_size=0) as code_mode:
        plain = code_mode.run("{'numbers': list(range(3))}", "s")
        assert plain.result_summary is None and plain.short_result == plain.result  # no pandas imported: nothing to cut
        tables = code_mode.run("import pandas\n{'wide': pandas.DataFrame({f'c{i}': range(30) for i in range(12)}), 'n': 1}", "s")
    assert tables.status == "ok", tables.error
    assert "[30 rows x 12 columns]" in tables.short_result and "'n': 1" in tables.short_result
    shown_rows = [line.split()[0] for line in tables.short_result.splitlines() if line.split() and line.split()[0].isdigit()]
    assert shown_rows == ["0", "1", "2", "3", "4", "25", "26", "27", "28", "29"]
    assert "c5" not in tables.short_result  # the middle columns are cut too
    assert "29" in tables.result and "c5" in tables.result and "rows x" not in tables.result  # the whole text as before
