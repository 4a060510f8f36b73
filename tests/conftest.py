"""The project's own tests: they use the suite's plugin fixtures (cluster, k8s, namespace)."""

pytest_plugins = ["pytester"]
