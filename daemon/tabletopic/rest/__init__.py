"""Kafka Connect's REST API: its paths, JSON shapes, status codes and error bodies, over the herder."""
