"""Pulsar's admin REST API, one module per resource (`broker.admin.server` assembles them).

A front end, beside `broker.protocol`: each route translates an HTTP request into calls on the
service and the packages below it, and answers with Pulsar's paths, JSON field names and status
codes. `http` holds the shared request helpers and the error mapping, `access` the route access
rules, `lookup` the owner redirect every topic route goes through.

May import `broker.service` and every package below it; never `broker.protocol` (the two front
ends share only what lies below them).
"""
