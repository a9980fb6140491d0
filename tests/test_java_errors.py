"""Java exceptions told apart by class, on the real JVM: each raised by Iceberg itself, through py4j
and through pyspark's conversion of the kinds it knows."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pyspark.errors.exceptions.captured import CapturedException

from tabletopic.write.java_errors import JAVA_ERRORS, JavaErrorKind, classify, java_error_message
from tabletopic.write.spark_session import SparkRuntime
from tests.support import Warehouse


def _raised(call: Callable[[], Any], what: str) -> BaseException:
    try:
        call()
    except JAVA_ERRORS as exc:
        return exc
    raise AssertionError(f"{what}: nothing was raised")


def test_each_kind_the_sink_tells_apart_is_known_by_its_class(spark: SparkRuntime, warehouse: Warehouse) -> None:
    jvm = spark.jvm
    catalog = spark.iceberg_catalog(warehouse.catalog)
    ident = jvm.org.apache.iceberg.catalog.TableIdentifier.parse
    namespace = ident("db.t").namespace()
    schema = jvm.org.apache.iceberg.spark.SparkSchemaUtil.convert(
        jvm.org.apache.spark.sql.types.DataType.fromJson('{"type":"struct","fields":[]}'))
    catalog.createNamespace(namespace)
    table = catalog.createTable(ident("db.t"), schema)
    stale = table.operations().current()
    table.updateProperties().set("a", "1").commit()
    nothing = spark.session.sparkContext._gateway.new_array(jvm.java.lang.Object, 0)

    cases = {
        "a namespace made twice": (lambda: catalog.createNamespace(namespace), JavaErrorKind.ALREADY_EXISTS),
        "a table made twice": (lambda: catalog.createTable(ident("db.t"), schema), JavaErrorKind.ALREADY_EXISTS),
        "a missing table": (lambda: catalog.loadTable(ident("db.gone")), JavaErrorKind.NO_SUCH_TABLE),
        "a missing namespace": (lambda: catalog.loadNamespaceMetadata(ident("gone.t").namespace()),
                                JavaErrorKind.NO_SUCH_NAMESPACE),
        "a commit on stale metadata": (lambda: table.operations().commit(stale, table.operations().current()),
                                       JavaErrorKind.CONFLICT),
        "a failed validation": (lambda: jvm.org.apache.iceberg.exceptions.ValidationException.check(
            False, "conflicting files", nothing), JavaErrorKind.VALIDATION),
        # pyspark turns an IllegalArgumentException into its own exception, keeping the Java one.
        "a refused argument": (lambda: ident(""), JavaErrorKind.REFUSED),
        "an I/O failure": (lambda: jvm.java.io.FileInputStream("/nonexistent/x"), JavaErrorKind.OTHER),
    }
    for what, (call, kind) in cases.items():
        exc = _raised(call, what)
        assert classify(exc) is kind, (what, java_error_message(exc))
        assert java_error_message(exc).startswith(("org.apache.", "java.")), (what, java_error_message(exc))
    # The path through pyspark's own exception, which keeps the Java one aside, is taken too.
    assert isinstance(_raised(lambda: ident(""), "a refused argument"), CapturedException)
