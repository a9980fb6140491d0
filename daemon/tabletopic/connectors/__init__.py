"""Connectors as Kafka Connect runs them: configurations with target states, and their running parts.

``config_store`` keeps what should run (standalone in memory, distributed in a topic);
``runtime`` is one connector running in this process; ``herder`` drives each runtime to
what its store says and answers the REST API; ``offsets`` reads and changes the offsets
a connector's tables hold.
"""
