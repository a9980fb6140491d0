"""JSON Schema compatibility, with Confluent's rules: a diff from one schema to the next.

A JSON Schema says which documents are valid, so "the new schema reads old data"
(BACKWARD) means every document the old one accepted, the new one accepts too.
Changes that widen what is accepted are compatible (a type extended, a bound
relaxed, an enum extended, a property removed from an open object); changes that
narrow it are not.  Properties follow the object's content model, as Confluent's
do: in an *open* model (no ``additionalProperties``, or ``true``) any property was
already allowed, so removing one is compatible and adding a typed one is not (old
data may hold anything under that name); in a *closed* model (``false``) adding an
optional property is compatible and removing one is not; a *partially open* model
(``additionalProperties`` a schema) decides by whether that schema covers it.
Confluent's STRICT set of compatible changes is the one used.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from tabletopic.registry.compatibility_levels import pairs
from tabletopic.registry.json_schema import JsonSchema
from tabletopic.registry.json_schema_nodes import combined_of, content_model, types_of

COMPATIBLE = frozenset({
    "SCHEMA_REMOVED", "TYPE_EXTENDED",
    "MAX_LENGTH_INCREASED", "MAX_LENGTH_REMOVED", "MIN_LENGTH_DECREASED", "MIN_LENGTH_REMOVED", "PATTERN_REMOVED",
    "MAXIMUM_INCREASED", "MAXIMUM_REMOVED", "MINIMUM_DECREASED", "MINIMUM_REMOVED",
    "EXCLUSIVE_MAXIMUM_INCREASED", "EXCLUSIVE_MAXIMUM_REMOVED", "EXCLUSIVE_MINIMUM_DECREASED",
    "EXCLUSIVE_MINIMUM_REMOVED", "MULTIPLE_OF_REDUCED", "MULTIPLE_OF_REMOVED",
    "REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED", "REQUIRED_ATTRIBUTE_REMOVED",
    "MAX_PROPERTIES_INCREASED", "MAX_PROPERTIES_REMOVED", "MIN_PROPERTIES_DECREASED", "MIN_PROPERTIES_REMOVED",
    "ADDITIONAL_PROPERTIES_ADDED", "ADDITIONAL_PROPERTIES_EXTENDED",
    "PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL",
    "REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL",
    "OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL", "PROPERTY_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL",
    "PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL", "PROPERTY_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
    "PROPERTY_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
    "ITEM_ADDED_TO_CLOSED_CONTENT_MODEL", "ITEM_REMOVED_FROM_OPEN_CONTENT_MODEL",
    "MAX_ITEMS_INCREASED", "MAX_ITEMS_REMOVED", "MIN_ITEMS_DECREASED", "MIN_ITEMS_REMOVED", "UNIQUE_ITEMS_REMOVED",
    "ENUM_ARRAY_EXTENDED", "COMBINED_TYPE_EXTENDED", "PRODUCT_TYPE_NARROWED", "SUM_TYPE_EXTENDED", "NOT_TYPE_NARROWED",
})

# Bounds on strings, numbers, objects and arrays, and the difference names of their changes
# (a larger maximum is wider, a larger minimum is narrower: the names say which is compatible).
_BOUNDS = (("maxLength", "MAX_LENGTH"), ("minLength", "MIN_LENGTH"), ("maximum", "MAXIMUM"), ("minimum", "MINIMUM"),
           ("exclusiveMaximum", "EXCLUSIVE_MAXIMUM"), ("exclusiveMinimum", "EXCLUSIVE_MINIMUM"),
           ("maxProperties", "MAX_PROPERTIES"), ("minProperties", "MIN_PROPERTIES"),
           ("maxItems", "MAX_ITEMS"), ("minItems", "MIN_ITEMS"))


@dataclass(frozen=True)
class Difference:
    kind: str
    path: str

    @property
    def compatible(self) -> bool:
        return self.kind in COMPATIBLE


def differences(original: JsonSchema, update: JsonSchema) -> list[Difference]:
    return list(_Diff(original, update).compare("#", original.root, update.root, None, None))


class _Diff:
    def __init__(self, original: JsonSchema, update: JsonSchema) -> None:
        self.o, self.u = original, update
        self.comparing: set[tuple[int, int]] = set()  # recursive schemas: a pair under way is assumed compatible

    def sub(self, path: str, o: Any, u: Any, o_res: Any, u_res: Any) -> list[Difference]:
        return list(self.compare(path, o, u, o_res, u_res))

    def compare(self, path: str, o: Any, u: Any, o_res: Any, u_res: Any) -> Iterator[Difference]:
        if o is None and u is None:
            return
        if o is None:
            yield Difference("SCHEMA_ADDED", path)
            return
        if u is None:
            yield Difference("SCHEMA_REMOVED", path)
            return
        o, o_res = self.o.resolve(o, o_res)
        u, u_res = self.u.resolve(u, u_res)
        pair = (id(o), id(u))
        if pair in self.comparing:
            return
        self.comparing.add(pair)
        try:
            yield from self._compare(path, o, u, o_res, u_res)
        finally:
            self.comparing.discard(pair)

    def _compare(self, path: str, o: Any, u: Any, o_res: Any, u_res: Any) -> Iterator[Difference]:
        if u is True or u == {}:
            return  # everything is valid under the update
        if o is False:
            return  # nothing was valid before
        if o is True or o == {}:
            yield Difference("TYPE_NARROWED", path)
            return
        if u is False:
            yield Difference("TYPE_NARROWED", path)
            return
        o_comb, u_comb = combined_of(o), combined_of(u)
        if o_comb is None and u_comb is not None:
            criterion, branches = u_comb
            if criterion in ("anyOf", "oneOf") or len(branches) == 1:
                for branch in branches:
                    found = self.sub(path, o, branch, o_res, u_res)
                    if all(d.compatible for d in found):
                        yield from found
                        if len(branches) > 1:
                            yield Difference("SUM_TYPE_EXTENDED", path)
                        return
            yield Difference("COMBINED_TYPE_CHANGED", path)
            return
        if o_comb is not None and u_comb is None:
            criterion, branches = o_comb
            if criterion == "allOf" or len(branches) == 1:
                for branch in branches:
                    found = self.sub(path, branch, u, o_res, u_res)
                    if all(d.compatible for d in found):
                        yield from found
                        if len(branches) > 1:
                            yield Difference("PRODUCT_TYPE_NARROWED", path)
                        return
            yield Difference("COMBINED_TYPE_CHANGED", path)
            return
        if o_comb is not None and u_comb is not None:
            yield from self.combined(path, o_comb, u_comb, o_res, u_res)
            return
        ot, ut = types_of(o), types_of(u)
        if ot != ut:
            if ot <= ut or (ot - ut == {"integer"} and "number" in ut):
                yield Difference("TYPE_EXTENDED", path)
            else:
                yield Difference("TYPE_NARROWED" if ut <= ot else "TYPE_CHANGED", path)
                return
        yield from self.keywords(path, o, u)
        if "object" in ot and "object" in ut:
            yield from self.objects(path, o, u, o_res, u_res)
        if "array" in ot and "array" in ut:
            yield from self.arrays(path, o, u, o_res, u_res)

    def combined(self, path: str, o_comb: tuple[str, list[Any]], u_comb: tuple[str, list[Any]],
                 o_res: Any, u_res: Any) -> Iterator[Difference]:
        (oc, ob), (uc, ub) = o_comb, u_comb
        if oc != uc:
            yield Difference("COMBINED_TYPE_CHANGED", path)
            return
        # Each original branch must be matched by a compatible branch of the update.
        unmatched = 0
        for i, branch in enumerate(ob):
            if not any(all(d.compatible for d in self.sub(f"{path}/{oc}/{i}", branch, other, o_res, u_res))
                       for other in ub):
                unmatched += 1
        if unmatched:
            yield Difference("COMBINED_TYPE_SUBSCHEMAS_CHANGED", path)
        elif len(ub) > len(ob):
            yield Difference("PRODUCT_TYPE_EXTENDED" if oc == "allOf" else "SUM_TYPE_EXTENDED", path)
        elif len(ub) < len(ob):
            yield Difference("PRODUCT_TYPE_NARROWED" if oc == "allOf" else "SUM_TYPE_NARROWED", path)

    @staticmethod
    def keywords(path: str, o: dict[str, Any], u: dict[str, Any]) -> Iterator[Difference]:
        for key, name in _BOUNDS:
            ov, uv = o.get(key), u.get(key)
            if ov == uv or isinstance(ov, bool) or isinstance(uv, bool):
                continue
            if ov is None:
                yield Difference(f"{name}_ADDED", f"{path}/{key}")
            elif uv is None:
                yield Difference(f"{name}_REMOVED", f"{path}/{key}")
            else:
                grew = uv > ov
                yield Difference(f"{name}_{'INCREASED' if grew else 'DECREASED'}", f"{path}/{key}")
        if o.get("pattern") != u.get("pattern"):
            kind = "PATTERN_ADDED" if "pattern" not in o else "PATTERN_REMOVED" if "pattern" not in u else \
                "PATTERN_CHANGED"
            yield Difference(kind, f"{path}/pattern")
        if o.get("multipleOf") != u.get("multipleOf"):
            om, um = o.get("multipleOf"), u.get("multipleOf")
            kind = "MULTIPLE_OF_ADDED" if om is None else "MULTIPLE_OF_REMOVED" if um is None else \
                "MULTIPLE_OF_REDUCED" if om % um == 0 else "MULTIPLE_OF_EXPANDED" if um % om == 0 else \
                "MULTIPLE_OF_CHANGED"
            yield Difference(kind, f"{path}/multipleOf")
        if "enum" in o or "enum" in u:
            oe, ue = o.get("enum"), u.get("enum")
            if ue is None:
                yield Difference("ENUM_ARRAY_EXTENDED", f"{path}/enum")
            elif oe is None:
                yield Difference("ENUM_ARRAY_NARROWED", f"{path}/enum")
            elif oe != ue:
                if all(v in ue for v in oe):
                    yield Difference("ENUM_ARRAY_EXTENDED", f"{path}/enum")
                elif all(v in oe for v in ue):
                    yield Difference("ENUM_ARRAY_NARROWED", f"{path}/enum")
                else:
                    yield Difference("ENUM_ARRAY_CHANGED", f"{path}/enum")
        if o.get("uniqueItems") != u.get("uniqueItems"):
            yield Difference("UNIQUE_ITEMS_ADDED" if u.get("uniqueItems") else "UNIQUE_ITEMS_REMOVED",
                             f"{path}/uniqueItems")

    def objects(self, path: str, o: dict[str, Any], u: dict[str, Any], o_res: Any, u_res: Any
                ) -> Iterator[Difference]:
        op, up = o.get("properties") or {}, u.get("properties") or {}
        o_req, u_req = set(o.get("required") or []), set(u.get("required") or [])
        for name in op:
            if name in up and (name in o_req) != (name in u_req):
                here = f"{path}/required/{name}"
                if name in u_req:
                    has_default = isinstance(up[name], dict) and "default" in up[name]
                    yield Difference("REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED" if has_default
                                     else "REQUIRED_ATTRIBUTE_ADDED", here)
                else:
                    yield Difference("REQUIRED_ATTRIBUTE_REMOVED", here)
        for name in sorted(op.keys() | up.keys()):
            here = f"{path}/properties/{name}"
            if name not in up:
                model, extra = content_model(u)
                if model == "open":
                    yield Difference("PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL", here)
                elif model == "partial":
                    found = self.sub(here, op[name], extra, o_res, u_res)
                    yield from found
                    yield Difference("PROPERTY_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"
                                     if all(d.compatible for d in found)
                                     else "PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", here)
                elif op[name] is False:
                    yield Difference("PROPERTY_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL", here)
                else:
                    yield Difference("PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL", here)
            elif name not in op:
                model, extra = content_model(o)
                if model == "open":
                    if up[name] is True or up[name] == {}:
                        yield Difference("PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL", here)
                    elif name in u_req:
                        yield Difference("REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_OPEN_CONTENT_MODEL"
                                         if isinstance(up[name], dict) and "default" in up[name]
                                         else "REQUIRED_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL", here)
                    else:
                        yield Difference("OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL", here)
                    continue
                if model == "partial":
                    found = self.sub(here, extra, up[name], o_res, u_res)
                    yield from found
                    yield Difference("PROPERTY_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"
                                     if all(d.compatible for d in found)
                                     else "PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", here)
                if name in u_req:
                    yield Difference("REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL"
                                     if isinstance(up[name], dict) and "default" in up[name]
                                     else "REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL", here)
                else:
                    yield Difference("OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL", here)
            else:
                yield from self.compare(here, op[name], up[name], o_res, u_res)
        here = f"{path}/additionalProperties"
        (om, oa), (um, ua) = content_model(o), content_model(u)
        if (om == "closed") != (um == "closed"):
            yield Difference("ADDITIONAL_PROPERTIES_ADDED" if om == "closed" else "ADDITIONAL_PROPERTIES_REMOVED", here)
        elif om == "open" and um == "partial":
            yield Difference("ADDITIONAL_PROPERTIES_NARROWED", here)
        elif om == "partial" and um == "open":
            yield Difference("ADDITIONAL_PROPERTIES_EXTENDED", here)
        elif om == "partial" and um == "partial":
            yield from self.compare(here, oa, ua, o_res, u_res)

    def arrays(self, path: str, o: dict[str, Any], u: dict[str, Any], o_res: Any, u_res: Any) -> Iterator[Difference]:
        oi, ui = o.get("items"), u.get("items")
        if isinstance(oi, list) or isinstance(ui, list):  # tuples: position by position
            ol, ul = oi if isinstance(oi, list) else [], ui if isinstance(ui, list) else []
            for i in range(max(len(ol), len(ul))):
                here = f"{path}/items/{i}"
                if i >= len(ul):
                    closed = u.get("additionalItems", True) is False
                    yield Difference("ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL" if closed
                                     else "ITEM_REMOVED_FROM_OPEN_CONTENT_MODEL", here)
                elif i >= len(ol):
                    closed = o.get("additionalItems", True) is False
                    yield Difference("ITEM_ADDED_TO_CLOSED_CONTENT_MODEL" if closed
                                     else "ITEM_ADDED_TO_OPEN_CONTENT_MODEL", here)
                else:
                    yield from self.compare(here, ol[i], ul[i], o_res, u_res)
            return
        if oi is None and ui is not None:
            yield Difference("TYPE_NARROWED", f"{path}/items")
        elif oi is not None and ui is not None:
            yield from self.compare(f"{path}/items", oi, ui, o_res, u_res)


def compatibility_problems(level: str, new: JsonSchema, previous: list[JsonSchema]) -> list[str]:
    """Why ``new`` may not follow ``previous`` (oldest first, live versions only) under ``level``."""
    problems = [f"{d.kind} at {d.path}" for original, update, _ in pairs(level, new, previous)
                for d in differences(original, update) if not d.compatible]
    return list(dict.fromkeys(problems))
