# The C allocator first, before any thread allocates (hermes_web/allocator.py says why).
from hermes_web import allocator

allocator.tune()

from hermes_web.celery import app as celery_app  # noqa: E402

__all__ = ["celery_app"]
