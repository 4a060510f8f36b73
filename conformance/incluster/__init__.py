"""In-cluster runs, for clusters whose API server cannot reach the machine running the suite
(a managed cluster): the suite runs as a Job in the cluster it tests, its witness behind a
Service there, and the report comes back to the caller.

objects: the run's manifests and the names both sides use; run: the caller's side
(`convoy-conformance run --in-cluster`); pod: the Job's entrypoint; image: the suite's image
(`convoy-conformance suite-image`).
"""
