"""The Pulsar binary-protocol front end: bytes in, core calls, frames out.

- `connection`: one client connection (routing, keepalive, backpressure); `state`: its states;
- `auth`: CONNECT's authentication and the credentials' refresh;
- `producer_commands`, `consumer_commands`: PRODUCER, CLOSE_PRODUCER; SUBSCRIBE, FLOW, ACK, SEEK...
  (for persistent and non-persistent topics); `links`: what producers and consumers send, as frames;
- `frontend`: the collaborators every connection is handed;
- `lookup`, `topic_lists`, `schemas`: LOOKUP, topic lists and watchers, schema commands;
- `revocation`: closing producers and consumers whose grants were revoked.

The only place that knows Pulsar's command objects (`wire.pulsar`, `proto`). May import
`broker.service` and everything below it; never `broker.admin`.
"""
