"""HTTP for the plugin: the hot path's lean keep-alive transport, and the proxy rule of every client.

- ``keepalive``: :class:`~pytest_agentgym.transport.keepalive.KeepAliveTransport`, an O(1)
  pool of keep-alive HTTP/1.1 connections per server (the keep-alive race, back-pressure
  when short of file descriptors, ``ensure_file_room``);
- ``http11``: its framing: a request written in one piece, an answer read back whole;
- ``route``: the direct route of the hot path (``Route``, ``RawAnswer``, ``encode_json``):
  the env and model clients' requests without httpx's request and response objects;
- ``proxies``: the one proxy rule (``proxy_for``) and the httpx clients that follow it
  (``http_client``, ``async_http_client``), for everything off the hot path.

Why hand-written rather than aiohttp's client: docs/how-it-works.md, "The hot path".
"""
