# server/ HTTP side: serve, TLS, metrics, logs, reload, integration tests, make run.
