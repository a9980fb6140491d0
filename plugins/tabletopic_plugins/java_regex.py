"""Java's ``java.util.regex`` patterns and ``Matcher.replaceFirst`` replacements, for Python's ``re``.

Connect's RegexRouter and TopicNameMatches take Java patterns. The common syntax is the same in both;
what differs and is translated here: named groups ``(?<name>...)`` (Python writes ``(?P<name>...)``),
``\\Q...\\E`` quoting, and the replacement's ``$1`` and ``${name}`` references with ``\\`` escapes. A
pattern Python cannot compile is refused with Python's reason.
"""

from __future__ import annotations

import re


def compile_java(pattern: str) -> re.Pattern[str]:
    try:
        return re.compile(_translate(pattern))
    except re.error as exc:
        raise ValueError(f"{pattern!r} is not a regular expression this sink can use: {exc}") from None


def _translate(pattern: str) -> str:
    out: list[str] = []
    i, n = 0, len(pattern)
    in_class = False
    while i < n:
        c = pattern[i]
        if c == "\\" and i + 1 < n:
            nxt = pattern[i + 1]
            if nxt == "Q":
                end = pattern.find("\\E", i + 2)
                quoted = pattern[i + 2:] if end < 0 else pattern[i + 2:end]
                out.append(re.escape(quoted))
                i = n if end < 0 else end + 2
                continue
            out.append(pattern[i:i + 2])
            i += 2
            continue
        if in_class:
            if c == "]":
                in_class = False
            out.append(c)
            i += 1
            continue
        if c == "[":
            in_class = True
            out.append(c)
            if i + 1 < n and pattern[i + 1] == "]":  # "[]...]": a ] first in a class is literal in Java too
                out.append("\\]")
                i += 1
            i += 1
            continue
        if pattern.startswith("(?<", i) and i + 3 < n and pattern[i + 3] not in "=!":
            out.append("(?P<")
            i += 3
            continue
        out.append(c)
        i += 1
    return "".join(out)


def replace_first(regex: re.Pattern[str], replacement: str, text: str) -> str:
    """``Matcher.replaceFirst``: the first match of ``regex`` in ``text`` replaced, with Java's ``$n``,
    ``${name}`` and ``\\`` escapes in ``replacement``."""
    match = regex.search(text)
    if match is None:
        return text
    return text[:match.start()] + expand(match, replacement) + text[match.end():]


def check_replacement(regex: re.Pattern[str], replacement: str) -> None:
    """ValueError where ``replacement`` names a group ``regex`` has not, or is malformed: Java finds it at the
    first match, here it is found before any."""
    _expand(regex, None, replacement)


def expand(match: re.Match[str], replacement: str) -> str:
    return _expand(match.re, match, replacement)


def _expand(regex: re.Pattern[str], match: re.Match[str] | None, replacement: str) -> str:
    out: list[str] = []
    i, n = 0, len(replacement)
    while i < n:
        c = replacement[i]
        if c == "\\":
            i += 1
            if i >= n:
                raise ValueError("character to be escaped is missing")
            out.append(replacement[i])
            i += 1
        elif c == "$":
            i += 1
            if i >= n:
                raise ValueError("Illegal group reference: group index is missing")
            if replacement[i] == "{":
                end = replacement.find("}", i)
                if end < 0:
                    raise ValueError("named capturing group is missing trailing '}'")
                name = replacement[i + 1:end]
                if name not in regex.groupindex:
                    raise ValueError(f"No group with name {{{name}}}")
                out.append((match.group(name) if match else "") or "")
                i = end + 1
            else:
                if not replacement[i].isdigit():
                    raise ValueError("Illegal group reference")
                # Java takes as many digits as still name a group.
                group = int(replacement[i])
                i += 1
                while i < n and replacement[i].isdigit() and group * 10 + int(replacement[i]) <= regex.groups:
                    group = group * 10 + int(replacement[i])
                    i += 1
                if group > regex.groups:
                    raise ValueError(f"No group {group}")
                out.append((match.group(group) if match else "") or "")
        else:
            out.append(c)
            i += 1
    return "".join(out)
