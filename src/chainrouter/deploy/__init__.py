"""The deployment recipe: systemd units, the balancer, Redis and PostgreSQL settings, rendered
from a site description (render.py; docs/deployment.md)."""
