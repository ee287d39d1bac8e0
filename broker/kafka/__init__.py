"""The Kafka wire-protocol front end."""
