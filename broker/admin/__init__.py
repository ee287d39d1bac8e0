"""Pulsar's admin REST API, one module per resource (`broker.admin.server` assembles them)."""
