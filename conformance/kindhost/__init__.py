"""kind on a host whose own Docker cannot run it: the suite's own Docker engine and node image.

Sandboxed CI hosts (this project's own, for one) often have a kernel that kind needs but neither
a Docker engine nor privileged containers: the capability bounding set lacks a capability that
`--privileged` asks for, so runc refuses to start the container. This package makes kind usable
there without touching what the host shares with others:

- `engine`: Debian's dockerd in a network namespace of its own (its bridges, NAT and forwarding
  stay there), with an OCI runtime wrapper (`oci_runtime`) that drops from each container the
  capabilities the host cannot grant; a veth and one route let this machine reach the nodes.
- `images`: the kind node image built from Debian's packages and Go modules (kubelet, kubeadm,
  containerd, the control plane's images preloaded), the controller's base image, both cached
  by version in the engine's data root.
- `files/`: what goes into the node image besides (the entrypoint wrapper that keeps the node's
  writes off this machine's kernel settings, a static CNI configuration) and the kind config.

`python -m conformance.kindhost up` starts the engine and builds what is missing; `env` prints
the variables and pytest options that point kind and the suite at it; `down` stops it.
"""
