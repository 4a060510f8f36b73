"""The convoy API's names (docs/api-reference.md): the one place that both the conformance suite
and the reference controller read them from, so that the suite never imports the controller it
judges. Only names the document gives: what either side makes of them stays its own.
"""

from __future__ import annotations

GROUP = "convoy.kumodo.io"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"

RELEASES = "releases"
CLUSTERS = "clusters"
INVENTORIES = "releaseinventories"

#: Release annotations: the requests of /sync and what the subresources write.
SYNC_REQUESTED_AT = f"{GROUP}/sync-requested-at"
SYNC_FORCE_REQUESTED_AT = f"{GROUP}/sync-force-requested-at"
PIN = f"{GROUP}/pin"
MUTATIONS = f"{GROUP}/mutations"
LIFECYCLE = f"{GROUP}/lifecycle"

#: The subresource API (releases/sync, pin, mutations, lifecycle), an aggregated API.
SUBRESOURCE_GROUP = f"subresources.{GROUP}"
SUBRESOURCE_VERSION = "v1alpha1"
SUBRESOURCE_GROUP_VERSION = f"{SUBRESOURCE_GROUP}/{SUBRESOURCE_VERSION}"
#: The APIService that routes the subresource API to the controller.
API_SERVICE = f"{SUBRESOURCE_VERSION}.{SUBRESOURCE_GROUP}"
