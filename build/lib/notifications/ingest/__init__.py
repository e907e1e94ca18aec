"""HTTP ingest: other services send notifications with POST /api/notifications/ and a bearer token."""
