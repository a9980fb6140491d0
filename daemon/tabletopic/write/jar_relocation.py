"""Relocate a Java package inside jar files, as Maven's shade plugin would.

The Iceberg Spark runtime jar shipped in the ``snowpark-connect-deps-iceberg``
wheel was built without the shaded Jackson it references
(``org.apache.iceberg.shaded.com.fasterxml.jackson``).  Nothing may come from
Maven here, so we rewrite the Jackson jars that pyspark already ships: every
class file's constant pool and every resource path under the old package is
renamed to the shaded one.  Renaming inside UTF-8 constants is safe because
both package names are plain ASCII, and class files store names only there.
"""

from __future__ import annotations

import struct
import zipfile
from collections.abc import Iterable
from pathlib import Path

# Constant-pool tags and the fixed size of their payloads (JVMS 4.4).
_FIXED_SIZES = {3: 4, 4: 4, 5: 8, 6: 8, 7: 2, 8: 2, 9: 4, 10: 4, 11: 4, 12: 4, 15: 3, 16: 2, 17: 4, 18: 4, 19: 2, 20: 2}
_UTF8 = 1
_WIDE = {5, 6}  # long and double take two constant-pool slots


class Relocation:
    """One package rename, in both the internal (``a/b``) and dotted form."""

    def __init__(self, old_package: str, new_package: str) -> None:
        self.old_slash = old_package.replace(".", "/").encode() + b"/"
        self.new_slash = new_package.replace(".", "/").encode() + b"/"
        self.old_dot = old_package.encode() + b"."
        self.new_dot = new_package.encode() + b"."

    def rename(self, data: bytes) -> bytes:
        # Reflection and service loading use the dotted form, descriptors the slashed.
        return data.replace(self.old_slash, self.new_slash).replace(self.old_dot, self.new_dot)

    def rename_path(self, path: str) -> str:
        return self.rename(path.encode()).decode()


def relocate_class(data: bytes, relocation: Relocation) -> bytes:
    """Return the class file with every UTF-8 constant renamed."""
    if data[:4] != b"\xca\xfe\xba\xbe":
        raise ValueError("not a Java class file")
    count = struct.unpack_from(">H", data, 8)[0]
    out = bytearray(data[:10])
    pos = 10
    index = 1
    while index < count:
        tag = data[pos]
        if tag == _UTF8:
            length = struct.unpack_from(">H", data, pos + 1)[0]
            text = relocation.rename(data[pos + 3 : pos + 3 + length])
            out += bytes([tag]) + struct.pack(">H", len(text)) + text
            pos += 3 + length
        else:
            size = _FIXED_SIZES.get(tag)
            if size is None:
                raise ValueError(f"unknown constant-pool tag {tag} at byte {pos}")
            out += data[pos : pos + 1 + size]
            pos += 1 + size
        index += 2 if tag in _WIDE else 1
    out += data[pos:]
    return bytes(out)


def relocate_jars(sources: Iterable[Path], target: Path, relocation: Relocation) -> int:
    """Write one jar holding the relocated contents of ``sources``; return its class count."""
    classes = 0
    seen: set[str] = set()
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as out:
        for source in sources:
            with zipfile.ZipFile(source) as jar:
                for info in jar.infolist():
                    name = info.filename
                    # Multi-release variants and module descriptors name the
                    # unshaded module; the base classes work on every JVM.
                    if info.is_dir() or name.startswith("META-INF/versions/") or name.endswith("module-info.class"):
                        continue
                    if name.upper().endswith((".SF", ".RSA", ".DSA")) or name == "META-INF/MANIFEST.MF":
                        continue
                    data = jar.read(name)
                    if name.endswith(".class"):
                        data = relocate_class(data, relocation)
                        classes += 1
                    elif name.startswith("META-INF/services/"):
                        data = relocation.rename(data)
                    new_name = relocation.rename_path(name)
                    if new_name in seen:
                        continue
                    seen.add(new_name)
                    out.writestr(new_name, data)
    return classes
