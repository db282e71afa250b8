"""Tool filter_rows: keep the rows for which every condition holds, each condition a column, an
operator from a fixed set and a value — compared with boolean masks, never evaluated as code."""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import pandas

from toolpath.catalogs.tabular._common import check_columns, dates_of, is_number_column

#: Operators that compare a column with one value.
COMPARISONS = ("==", "!=", ">", ">=", "<", "<=")
#: Operators that order values, so they need numbers or dates.
ORDERINGS = (">", ">=", "<", "<=", "between")
#: Every operator filter_rows takes.
OPERATORS = (*COMPARISONS, "between", "in", "not in", "contains", "is missing", "is not missing")


def filter_rows(table: pandas.DataFrame, conditions: list[list]) -> pandas.DataFrame:
    """The rows of ``table`` for which every condition holds, in the table's order (their index kept).

    A condition is ``[column, operator, value]``, such as ``['region', '==', 'North']`` or
    ``['revenue', 'between', [1000, 5000]]``. Operators: ``==``, ``!=``, ``>``, ``>=``, ``<``, ``<=``;
    ``between`` takes ``[low, high]`` and keeps both ends; ``in`` and ``not in`` take a list;
    ``contains`` keeps text containing the value; ``is missing`` and ``is not missing`` take no value
    (``None``, or a condition of two items).

    How a value is compared depends on the column:

    - numbers: the value as a number, so ``'1000'`` given as text compares as 1000;
    - dates (a date column, or text that reads as dates in every row, as CSV files hold them): the value
      as a date (``pandas.to_datetime``), so ``'2024-03-01'`` and ``'03/01/2024'`` both work;
    - true/false: ``True``, ``False`` or the words true/false, yes/no, 1/0;
    - other text: as text, ignoring case and surrounding spaces for ``==``, ``!=``, ``in``, ``not in``
      and ``contains`` (``'north'`` matches ``'North'``); ``>``, ``<`` and ``between`` are refused there,
      since alphabetical order is rarely what a filter means.

    A missing value (an empty cell) fails every condition except ``is missing``, as in SQL: ``!=`` and
    ``not in`` do not keep it. Values are compared, never evaluated: no text becomes code.

    Raises:
        KeyError: a column the table does not have (naming the table's columns).
        ValueError: no conditions, a condition that is not ``[column, operator, value]``, an unknown
            operator, or a value the column cannot be compared with — naming the condition.
    """
    if isinstance(conditions, str):
        raise ValueError(
            f"filter_rows takes conditions as [[column, operator, value], ...], such as [['region', '==', 'North']], not a text query: {conditions!r}"
        )
    if not isinstance(conditions, Sequence) or not conditions:
        raise ValueError(f"filter_rows needs at least one condition [column, operator, value], such as [['region', '==', 'North']]; got {conditions!r}")
    keep = pandas.Series(True, index=table.index)
    for condition in conditions:
        keep &= _matches(table, condition)
    return table[keep]


def _matches(table: pandas.DataFrame, condition: object) -> pandas.Series:
    """The boolean mask of the rows for which ``condition`` holds."""
    if isinstance(condition, str) or not isinstance(condition, Sequence) or len(condition) not in (2, 3):
        raise ValueError(f"filter_rows: each condition is [column, operator, value], such as ['region', '==', 'North']; not {condition!r}")
    column_name, operator = condition[0], condition[1]
    value = condition[2] if len(condition) == 3 else None
    if not isinstance(column_name, str):
        raise ValueError(f"filter_rows: a condition starts with a column name, not {column_name!r} (condition {list(condition)!r})")
    if not isinstance(operator, str) or operator.strip().lower() not in OPERATORS:
        raise ValueError(f"filter_rows: unknown operator {operator!r} in condition {list(condition)!r}; use one of {', '.join(OPERATORS)}")
    operator = operator.strip().lower()
    if len(condition) == 2 and operator not in ("is missing", "is not missing"):
        raise ValueError(f"filter_rows: condition {list(condition)!r} has no value to compare with; write [column, operator, value]")
    check_columns(table, column_name)
    column = table[column_name]
    if operator == "is missing":
        return column.isna()
    if operator == "is not missing":
        return column.notna()
    present = column.notna()
    if operator == "contains":
        if not isinstance(value, str | int | float) or isinstance(value, bool):
            raise ValueError(f"filter_rows: contains takes a text in condition {list(condition)!r}, not {value!r}")
        return present & column.astype(str).str.casefold().str.contains(str(value).strip().casefold(), regex=False)
    values = _operands(operator, value, condition)
    compared, kind = _comparable(column, values, operator, condition)
    if operator == "between":
        low, high = compared
        return present & (_column_values(column, kind) >= low) & (_column_values(column, kind) <= high)
    if operator in ("in", "not in"):
        member = _column_values(column, kind).isin(compared)
        return present & (member if operator == "in" else ~member)
    (operand,) = compared
    cells = _column_values(column, kind)
    outcome = {"==": cells == operand, "!=": cells != operand, ">": cells > operand, ">=": cells >= operand, "<": cells < operand, "<=": cells <= operand}[
        operator
    ]
    return present & outcome.fillna(False).astype(bool)


def _operands(operator: str, value: object, condition: Sequence) -> list:
    """The values an operator compares with, as a list: two for between, any number for in and not in,
    one otherwise."""
    if operator == "between":
        if isinstance(value, str) or not isinstance(value, Sequence) or len(value) != 2:
            raise ValueError(f"filter_rows: between takes [low, high] in condition {list(condition)!r}, not {value!r}")
        return list(value)
    if operator in ("in", "not in"):
        if isinstance(value, str) or not isinstance(value, Sequence):
            raise ValueError(f"filter_rows: {operator} takes a list of values, such as ['North', 'South'], in condition {list(condition)!r}, not {value!r}")
        return list(value)
    if isinstance(value, list | tuple | dict | set):
        raise ValueError(f"filter_rows: {operator} takes one value in condition {list(condition)!r}, not {value!r}; for several use in or between")
    return [value]


def _comparable(column: pandas.Series, values: list, operator: str, condition: Sequence) -> tuple[list, str]:
    """``values`` converted to the column's kind, and that kind: number, date, boolean or text.

    Raises:
        ValueError: a value that cannot be read as the column's kind, or an ordering operator on text,
            naming the condition.
    """
    column_name = column.name
    if pandas.api.types.is_bool_dtype(column):
        return [_boolean(value, condition) for value in values], "boolean"
    if is_number_column(column):
        numbers = []
        for value in values:
            number = None if isinstance(value, bool) else pandas.to_numeric(pandas.Series([value], dtype=object), errors="coerce").iloc[0]
            if number is None or pandas.isna(number):
                raise ValueError(f"filter_rows: column {column_name!r} holds numbers, and {value!r} is not one (condition {list(condition)!r})")
            numbers.append(number)
        return numbers, "number"
    if dates_of(column) is not None:
        dates = [_date(value) for value in values]
        if all(date is not None for date in dates):
            return dates, "date"
        if operator in ORDERINGS or pandas.api.types.is_datetime64_any_dtype(column):
            raise ValueError(
                f"filter_rows: column {column_name!r} holds dates, and {values!r} are not all dates (condition {list(condition)!r}); write them like 2024-03-01"
            )
    if operator in ORDERINGS:
        raise ValueError(
            f"filter_rows: column {column_name!r} holds text, not numbers or dates, so {operator!r} cannot order it (condition {list(condition)!r}); "
            "use ==, !=, in, not in or contains"
        )
    return [str(value).strip().casefold() for value in values], "text"


def _column_values(column: pandas.Series, kind: str) -> pandas.Series:
    """The column's values as compared for ``kind``: dates parsed, text folded to lower case."""
    if kind == "date":
        return dates_of(column)
    if kind == "text":
        return column.astype(str).str.strip().str.casefold().where(column.notna())
    return column


def _date(value: object) -> pandas.Timestamp | None:
    """``value`` as a date when it is a date or a text that reads as one (numbers are not dates here)."""
    if isinstance(value, bool | int | float) or value is None:
        return None
    with warnings.catch_warnings():  # pandas warns when it guesses a format
        warnings.simplefilter("ignore")
        try:
            date = pandas.to_datetime(value, format="mixed")
        except (ValueError, TypeError, OverflowError):
            return None
    return None if pandas.isna(date) else date


def _boolean(value: object, condition: Sequence) -> bool:
    """``value`` as true or false, from a boolean, 1 or 0, or the words true/false, yes/no."""
    words = {"true": True, "yes": True, "1": True, "false": False, "no": False, "0": False}
    if isinstance(value, bool):
        return value
    answer = words.get(str(value).strip().lower())
    if answer is None:
        raise ValueError(f"filter_rows: column {condition[0]!r} holds true/false values, and {value!r} is neither (condition {list(condition)!r})")
    return answer
