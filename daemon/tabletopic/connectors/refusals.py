"""What the herder refuses, by kind; each kind is one of Connect's HTTP answers in the REST layer."""

from __future__ import annotations


class HerderError(Exception):
    """A request the herder refuses; the REST layer picks the status Connect answers it with."""


class NotFound(HerderError):
    """No such connector, task or plugin."""


class AlreadyExists(HerderError):
    """A connector of that name exists."""


class BadRequest(HerderError):
    """The request itself is wrong: its body, or the connector's state for it."""


class NotReady(HerderError):
    """The worker cannot answer yet (its JVM is starting); asking again later will do."""
