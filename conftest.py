"""In-repo runs: load the plugin when the package is not installed (the entry point does then)."""

from importlib.metadata import entry_points

if not any(ep.value == "conformance.plugin" for ep in entry_points(group="pytest11")):
    pytest_plugins = ["conformance.plugin"]
