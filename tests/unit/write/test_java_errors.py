"""What a log line or a status says of a Python exception (tests/test_java_errors.py has the Java ones)."""

from __future__ import annotations

from tabletopic.write.java_errors import JavaErrorKind, classify, describe
from tabletopic.write.table_handle import CatalogUnavailable


def test_a_python_exception_is_its_message_or_its_type_and_of_no_java_kind() -> None:
    assert describe(CatalogUnavailable("cannot load table db.t: refused")) == "cannot load table db.t: refused"
    assert describe(KeyError()) == "KeyError"
    assert classify(ValueError("IllegalArgumentException: words are not a class")) is JavaErrorKind.OTHER
