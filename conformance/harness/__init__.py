"""The pytest integration: the run's cluster, the fixtures, namespaces, turns at a shared
controller, the xdist schedule, the stash keys, the clause marker, and the model-based
run's driver."""
