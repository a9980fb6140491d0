"""Whether a table's snapshots name only files that exist: ``tabletopic verify``.

A snapshot that names a missing file fails every reader of the table, and nothing but an older
snapshot brings it back. This reads, through pyiceberg (no JVM), the manifest list and manifests of
each ref's head snapshot (main, branches, tags), and asks storage for every file they hold live: data
files, equality and position delete files, deletion vectors (their Puffin files). Each must exist at
the size the manifest records: the writer's own count of the bytes, which a reader's offsets fall in.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

# Storage answers one file at a time; an object store's round trips overlap well this wide.
_PARALLEL_CHECKS = 16


@dataclass(frozen=True)
class Expected:
    """A file a snapshot names: what it is, and the size (and for a vector, the bytes) it must have."""

    path: str
    kind: str  # "data file", "equality delete file", "position delete file", "deletion vector", "manifest", ...
    size: int | None  # None: a metadata file whose size no manifest records


@dataclass(frozen=True)
class FileProblem:
    path: str
    kind: str
    problem: str  # "missing", or what differs

    def describe(self) -> str:
        return f"{self.problem}: {self.kind} {self.path}"


@dataclass
class IntegrityReport:
    table: str
    heads: dict[str, int] = field(default_factory=dict)  # ref -> snapshot id
    checked: Counter[str] = field(default_factory=Counter)  # kind -> files checked
    problems: list[FileProblem] = field(default_factory=list)

    @property
    def intact(self) -> bool:
        return not self.problems

    def describe(self) -> list[str]:
        if not self.heads:
            return [f"table {self.table}: no snapshot yet, nothing to check"]
        refs = ", ".join(f"{ref} at {sid}" for ref, sid in sorted(self.heads.items()))
        counts = ", ".join(f"{n} {kind}{'s' if n != 1 else ''}" for kind, n in sorted(self.checked.items()))
        if self.intact:
            return [f"table {self.table}: intact ({refs}): {counts}, each present at its recorded size"]
        lines = [f"table {self.table}: {len(self.problems)} file(s) missing or damaged ({refs}); checked {counts}"]
        lines += [f"  {p.describe()}" for p in self.problems]
        return lines


def check_table(table: Any, name: str) -> IntegrityReport:
    """Check every file the head snapshot of each of ``table``'s refs names (a pyiceberg ``Table``)."""
    report = IntegrityReport(name)
    io = table.io
    expected: dict[str, Expected] = {}
    manifests_seen: set[str] = set()
    for ref_name, ref in table.metadata.refs.items():
        snapshot = table.metadata.snapshot_by_id(ref.snapshot_id)
        if snapshot is None:
            report.problems.append(FileProblem(str(ref.snapshot_id), "snapshot", f"ref {ref_name} names a missing"))
            continue
        report.heads[ref_name] = snapshot.snapshot_id
        try:
            manifests = snapshot.manifests(io)
        except Exception as exc:  # missing or unreadable: a reader fails the same way
            report.problems.append(FileProblem(snapshot.manifest_list, "manifest list", _unreadable(exc)))
            report.checked["manifest list"] += 1
            continue
        expected.setdefault(snapshot.manifest_list, Expected(snapshot.manifest_list, "manifest list", None))
        for manifest in manifests:
            if manifest.manifest_path in manifests_seen:
                continue
            manifests_seen.add(manifest.manifest_path)
            try:
                entries = manifest.fetch_manifest_entry(io, discard_deleted=True)
            except Exception as exc:
                report.problems.append(FileProblem(manifest.manifest_path, "manifest", _unreadable(exc)))
                report.checked["manifest"] += 1
                continue
            expected[manifest.manifest_path] = Expected(manifest.manifest_path, "manifest", manifest.manifest_length)
            for entry in entries:
                _expect(expected, entry.data_file)
    for kind_of in expected.values():
        report.checked[kind_of.kind] += 1
    report.problems.extend(_check_all(io, expected.values()))
    return report


def _expect(expected: dict[str, Expected], file: Any) -> None:
    content = int(file.content)
    if content == 0:
        kind = "data file"
    elif content == 2:
        kind = "equality delete file"
    elif str(file.file_format).upper().endswith("PUFFIN"):
        kind = "deletion vector"
    else:
        kind = "position delete file"
    # Vectors that share a Puffin file name it once each: it is checked once.
    expected.setdefault(file.file_path, Expected(file.file_path, kind, int(file.file_size_in_bytes)))


def _check_all(io: Any, files: Iterable[Expected]) -> list[FileProblem]:
    with ThreadPoolExecutor(_PARALLEL_CHECKS, thread_name_prefix="verify") as pool:
        found = list(pool.map(lambda f: _check_one(io, f), files))
    return sorted((p for p in found if p is not None), key=lambda p: (p.kind, p.path))


def _check_one(io: Any, file: Expected) -> FileProblem | None:
    try:
        stored = io.new_input(file.path)
        if not stored.exists():
            return FileProblem(file.path, file.kind, "missing")
        size = len(stored)
    except Exception as exc:  # storage refused the question: the file cannot be shown present
        return FileProblem(file.path, file.kind, _unreadable(exc))
    if file.size is not None and size != file.size:
        return FileProblem(file.path, file.kind, f"{size} bytes where the manifest records {file.size}")
    return None


def _unreadable(exc: Exception) -> str:
    if isinstance(exc, FileNotFoundError):
        return "missing"
    return f"unreadable ({type(exc).__name__}: {exc})"
