"""tabletopic: a Kafka Connect-compatible Apache Iceberg sink in one Python daemon."""

__version__ = "0.1.0"
