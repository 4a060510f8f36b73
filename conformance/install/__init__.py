"""What installs a controller under test: the reference controller as a host process (host),
as a Deployment on kind (on_kind, kind_commands, kind_cli), a vendor's manifests (vendor), a
Deployment the suite finds (deployment), the CRDs (manifests) and the subresource API's
registration (subresources)."""
