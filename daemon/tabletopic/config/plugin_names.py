"""The names a Connect configuration gives a plugin: its class name, its simple name, or its short alias.

Connect (``PluginUtils.computeAliases``) accepts for each installed plugin its simple class name
(``JsonConverter``; for a nested class such as ``Cast$Value``, the nested part alone) and that name
without its kind's suffix (``Json`` for a ``Converter``, ``IcebergSink`` for a ``Connector``). An
alias two different plugins would share is no alias. Here each plugin is an entry point named after
its Connect class, and the entry points that load the same object are one plugin.
"""

from __future__ import annotations

from importlib.metadata import EntryPoint, entry_points

# What Connect cuts off a simple name to make its short alias (PluginType.simpleName()).
SUFFIXES = {"tabletopic.converters": "Converter", "tabletopic.transforms": "Transformation",
            "tabletopic.predicates": "Predicate"}


def available_plugins(group: str) -> dict[str, EntryPoint]:
    return {ep.name: ep for ep in entry_points(group=group)}


def simple_name(class_name: str) -> str:
    """Java's ``getSimpleName()``: after the package, and after the ``$`` of a nested class."""
    return class_name.rsplit(".", 1)[-1].rsplit("$", 1)[-1]


def aliases(class_names: dict[str, str], suffix: str) -> dict[str, str]:
    """Alias -> class name, for ``class_names`` (class name -> the object it loads): the simple name and,
    where it ends with ``suffix`` after something, the name without it; one naming two objects is left out."""
    candidates: dict[str, set[str]] = {}
    named: dict[str, str] = {}
    for class_name, target in class_names.items():
        simple = simple_name(class_name)
        pruned = simple[: simple.rfind(suffix)] if simple.rfind(suffix) > 0 else simple
        for alias in {simple, pruned}:
            candidates.setdefault(alias, set()).add(target)
            named.setdefault(alias, class_name)
    return {alias: named[alias] for alias, targets in candidates.items() if len(targets) == 1}


def resolve(group: str, name: str) -> str | None:
    """The entry point ``name`` stands for in ``group``: itself, or the plugin it is an alias of; None if none."""
    known = available_plugins(group)
    if name in known:
        return name
    return aliases({ep.name: ep.value for ep in known.values()}, SUFFIXES.get(group, "")).get(name)
