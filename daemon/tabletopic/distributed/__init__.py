"""Distributed mode: workers sharing connectors through Kafka Connect's config and status topics."""
