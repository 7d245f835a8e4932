"""The service's own Ray node: the private head the daemon starts and drives
(:mod:`._head`: 127.0.0.1 only, token authentication, its files in the home) and
the dashboard agent its raylet runs (:mod:`._agent`, a script run as
``python -I -S``: it publishes the ports the raylet waits for, and serves nothing).
Nothing is imported here: the daemon and the tests import the module they need."""
