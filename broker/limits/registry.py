"""Every multi-tenant policy (`broker.limits.spec.PolicySpec`), looked up by route, topic route
or stored key.

What must hold: routes, topic routes and keys are each unique.
"""

from __future__ import annotations

from broker.limits import caps, lifecycle, persistence, rates
from broker.limits.spec import PolicySpec
from common.invariant import invariant

ALL: tuple[PolicySpec, ...] = caps.SPECS + rates.SPECS + persistence.SPECS + lifecycle.SPECS

BY_ROUTE = {s.route: s for s in ALL if s.route}
BY_TOPIC_ROUTE = {s.topic_route: s for s in ALL if s.topic_route}
BY_KEY = {s.key: s for s in ALL}

invariant(len(BY_ROUTE) == sum(1 for s in ALL if s.route) and len(BY_KEY) == len(ALL)
          and len(BY_TOPIC_ROUTE) == sum(1 for s in ALL if s.topic_route), "policy names are unique")
