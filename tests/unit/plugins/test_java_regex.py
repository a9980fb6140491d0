"""Java regular expressions and replaceFirst replacements, as RegexRouter and TopicNameMatches take them."""

from __future__ import annotations

import pytest

from tabletopic_plugins.java_regex import compile_java, replace_first


@pytest.mark.parametrize(("pattern", "text", "matches"), [
    ("(?<name>a+)b", "aab", True),
    ("\\Qa.b\\E", "a.b", True),
    ("\\Qa.b\\E", "axb", False),
    ("[]a]+", "]a]", True),
    ("(?<=x)y|y", "y", True),
    ("a*+a", "aaa", False),  # possessive
])
def test_patterns(pattern: str, text: str, matches: bool) -> None:
    assert (compile_java(pattern).fullmatch(text) is not None) == matches


@pytest.mark.parametrize(("pattern", "replacement", "text", "expected"), [
    ("(a)(b)?", "$2$1", "ab", "ba"),
    ("(a)", "$1$1", "xa", "xaa"),
    ("(a)", "\\$1", "a", "$1"),
    ("(a)(b)(c)(d)(e)(f)(g)(h)(i)(j)", "$10", "abcdefghij", "j"),  # as many digits as name a group
    ("(a)", "$10", "a", "a0"),
    ("(?<x>a)", "${x}!", "a", "a!"),
])
def test_replace_first(pattern: str, replacement: str, text: str, expected: str) -> None:
    assert replace_first(compile_java(pattern), replacement, text) == expected
