"""moto's server, with Glue's UpdateTable held to its VersionId as AWS Glue holds it.

Iceberg's Glue catalog commits a table by UpdateTable with the VersionId it last read. AWS Glue
refuses the update once the table has moved on (ConcurrentModificationException), and Iceberg
retries from the new head. moto applies every update, so two commits from one base both land and
the later one replaces the other's snapshot: a commit beside another writer is lost, which no real
Glue allows. Run as ``python -m tabletopic.demo.moto_server -H HOST -p PORT``, as ``moto_server``.
"""

from __future__ import annotations

import sys
import threading
from typing import Any

from moto import server
from moto.glue.exceptions import GlueClientError
from moto.glue.responses import GlueResponse


class ConcurrentModificationException(GlueClientError):
    def __init__(self, message: str) -> None:
        super().__init__("ConcurrentModificationException", message)


# moto's server answers on several threads: the check and the update must be one step.
_updates = threading.Lock()
_update_table = GlueResponse.update_table


def _update_table_at_its_version(self: GlueResponse) -> Any:
    version = self.parameters.get("VersionId")
    with _updates:
        if version is not None:
            database, name = str(self.parameters["DatabaseName"]), str(self.parameters["TableInput"]["Name"])
            current = str(self.glue_backend.get_table(database, name)._current_version)
            if current != str(version):
                raise ConcurrentModificationException(
                    f"Update table failed due to concurrent modifications: version {version} was asked, "
                    f"the table is at {current}")
        return _update_table(self)


def main(argv: list[str]) -> None:
    GlueResponse.update_table = _update_table_at_its_version  # type: ignore[method-assign]
    server.main(argv)


if __name__ == "__main__":
    main(sys.argv[1:])
