"""Actor shells: one thin class per service that gives its plain class an inbox.

Each shell holds no logic its service could hold; it keeps the service's
per-session instances and converts nothing but what crosses the boundary. The
runtime (``pipeline/runtime/``) runs a shell as a Ray actor or as a plain
object; the shells themselves never import Ray.
"""
