"""What a Java exception means to the sink, read from its class chain, never from its message.

A Java exception reaches Python as py4j's ``Py4JJavaError``, or, for the kinds pyspark knows
(``IllegalArgumentException``, ``UnsupportedOperationException``, ...), as pyspark's
``CapturedException``: pyspark converts every py4j call's error once its session has started. Both
carry the Java throwable. :func:`classify` walks it, cause by cause and each one's superclasses, and
answers the first kind it knows, as a Java ``catch`` clause would; a message that happens to
contain a class's name misleads nothing.
"""

from __future__ import annotations

from enum import Enum
from typing import Any

from py4j.protocol import Py4JError, Py4JJavaError
from pyspark.errors.exceptions.captured import CapturedException

JAVA_ERRORS: tuple[type[Exception], ...] = (Py4JJavaError, CapturedException)
_CAUSES = 5  # Iceberg wraps an exception at most three deep; a cycle must not loop


class JavaErrorKind(Enum):
    VALIDATION = "validation"  # a commit's own checks failed: conflicting files, a missing base
    CONFLICT = "conflict"  # CommitFailedException: the metadata changed under the commit
    ALREADY_EXISTS = "already exists"
    NO_SUCH_NAMESPACE = "no such namespace"
    NO_SUCH_TABLE = "no such table"
    REFUSED = "refused"  # Iceberg refuses the request itself, the same way every time it is made
    OTHER = "other"  # anything else: the catalog, the storage or the JVM failing


# Iceberg's and Spark's classes of each kind. A subclass is of its superclass's kind
# (NoSuchIcebergTableException is a NoSuchTableException).
_KINDS: dict[str, JavaErrorKind] = {
    "org.apache.iceberg.exceptions.ValidationException": JavaErrorKind.VALIDATION,
    "org.apache.iceberg.exceptions.CommitFailedException": JavaErrorKind.CONFLICT,
    "org.apache.iceberg.exceptions.AlreadyExistsException": JavaErrorKind.ALREADY_EXISTS,
    "org.apache.spark.sql.catalyst.analysis.TableAlreadyExistsException": JavaErrorKind.ALREADY_EXISTS,
    "org.apache.spark.sql.catalyst.analysis.NamespaceAlreadyExistsException": JavaErrorKind.ALREADY_EXISTS,
    "org.apache.iceberg.exceptions.NoSuchNamespaceException": JavaErrorKind.NO_SUCH_NAMESPACE,
    "org.apache.spark.sql.catalyst.analysis.NoSuchNamespaceException": JavaErrorKind.NO_SUCH_NAMESPACE,
    "org.apache.iceberg.exceptions.NoSuchTableException": JavaErrorKind.NO_SUCH_TABLE,
    "org.apache.spark.sql.catalyst.analysis.NoSuchTableException": JavaErrorKind.NO_SUCH_TABLE,
    "java.lang.IllegalArgumentException": JavaErrorKind.REFUSED,
    "java.lang.IllegalStateException": JavaErrorKind.REFUSED,
    "java.lang.UnsupportedOperationException": JavaErrorKind.REFUSED,
}


def java_throwable(exc: BaseException) -> Any | None:
    """The Java throwable behind ``exc``; None for a Python exception, or pyspark's without one."""
    if isinstance(exc, Py4JJavaError):
        return exc.java_exception
    if isinstance(exc, CapturedException):
        return getattr(exc, "_origin", None)  # pyspark keeps it under this name only
    return None


def _causes(throwable: Any) -> list[Any]:
    chain: list[Any] = []
    while throwable is not None and len(chain) < _CAUSES:
        chain.append(throwable)
        throwable = throwable.getCause()
    return chain


def _class_names(throwable: Any) -> list[str]:
    names, cls = [], throwable.getClass()
    while cls is not None:
        names.append(cls.getName())
        cls = cls.getSuperclass()
    return names


def classify(exc: BaseException) -> JavaErrorKind:
    """The kind of the outermost exception in ``exc``'s cause chain whose class (or a superclass of
    it) is one the sink tells apart; OTHER if none is, or if the JVM can no longer say."""
    throwable = java_throwable(exc)
    if throwable is None:
        return JavaErrorKind.OTHER
    try:
        for cause in _causes(throwable):
            for name in _class_names(cause):
                if name in _KINDS:
                    return _KINDS[name]
    except Py4JError:  # the JVM went away meanwhile: nothing to tell it by
        pass
    return JavaErrorKind.OTHER


def describe(exc: BaseException) -> str:
    """What went wrong, in a line a log or a status can carry: a Java exception's causes (never its
    text, which is its stack trace), or a Python exception's message (its type's name if it has none)."""
    return java_error_message(exc) if isinstance(exc, JAVA_ERRORS) else str(exc) or type(exc).__name__


def java_error_message(exc: BaseException) -> str:
    """The Java exception and its causes, one line each, without the stack traces."""
    throwable = java_throwable(exc)
    if throwable is None:
        return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    try:
        return " <- caused by ".join(f"{t.getClass().getName()}: {t.getMessage()}" for t in _causes(throwable))
    except Py4JError:
        return f"{type(exc).__name__} (the JVM can no longer describe it)"
