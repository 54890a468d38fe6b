"""The web dashboard: server-rendered pages (jinja2) whose small JS reads the /v1 API, sending the token as a header."""
