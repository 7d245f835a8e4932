"""The kernel's isolation mechanisms the sandbox composes: bubblewrap's namespaces,
the seccomp filter, cgroup limits, and the workspace as an overlay. Each module
wraps one mechanism; :mod:`ollm_cli.pipeline.tools._sandbox` puts them together."""
