"""gunicorn's configuration for the web tier: the Dockerfile and the chart run `gunicorn -c python:settings.gunicorn`.

One sync worker serves one request at a time: a single client that sends half a request held the whole pod,
/healthz included, until gunicorn's timeout. Threaded workers (gthread) give each request a thread of its own,
and keep idle keep-alive connections in a poller rather than in a thread. A client that trickles its request
still holds one thread for as long as it trickles, so in production an ingress (or any reverse proxy) that
buffers whole requests before it passes them on must stand in front: then gunicorn only sees complete requests.

Options given on the command line (the chart's `web.args`) override these.
"""

import os

bind = os.environ.get("GUNICORN_BIND", "0.0.0.0:8000")
worker_class = "gthread"
# Two processes, so that a worker restarted by gunicorn (timeout, max_requests) never leaves the pod without one;
# eight threads each. An ingest request is short: a token lookup, a rate-limit step and notify()'s one Redis round
# trip, at most the critical class's wait budget (250 ms) more, or Redis's socket timeout (5 s) in an outage.
workers = int(os.environ.get("WEB_CONCURRENCY", "2"))
threads = int(os.environ.get("GUNICORN_THREADS", "8"))
# A worker process silent this long (hung, not merely busy: gthread's main loop keeps its heartbeat) is restarted.
timeout = 30
# On SIGTERM, requests in flight get this long, well past an ingest request's worst case and inside the pod's
# 30 s termination grace period.
graceful_timeout = 20
# Longer than an ingress keeps idle upstream connections (ingress-nginx: 60 s), so that the ingress, not gunicorn,
# closes them: a connection gunicorn closed while the ingress sent a POST on it would fail that POST.
keepalive = 75
# Connections per worker, kept-alive ones included; past this a worker stops accepting until some close.
worker_connections = 1000
# Request line and headers: far above what the API and the admin need, far below what would cost memory.
limit_request_line = 8190
limit_request_fields = 100
limit_request_field_size = 8190
