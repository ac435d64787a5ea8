"""Staff-only views of the whole installation: the dashboard, Prometheus metrics, one-time notices."""
