"""Mutants of `kubectl convoy` (a plugin process: the kill run puts a broken kubectl-convoy on
PATH): SYNC-10 and FORCE-6."""

from __future__ import annotations

import dataclasses

from convoy import kubectl_plugin, subresources
from mutants import mutant
from mutants.patching import wrap


@mutant("plugin-sync-does-nothing", "SYNC-10.post", kind="plugin")
def plugin_sync_does_nothing() -> None:
    """`kubectl convoy release sync` reports success without sending the POST."""

    @wrap(kubectl_plugin, "send")
    def send(original, api_client, namespace: str, name: str, action):
        if action.subresource is subresources.Subresource.SYNC:
            return {"metadata": {"annotations": {}}}
        return original(api_client, namespace, name, action)


@mutant("plugin-ignores-the-context-namespace", "SYNC-10.context-namespace", kind="plugin")
def plugin_ignores_the_context_namespace() -> None:
    """Without -n, `kubectl convoy` acts in the namespace default, whatever the kubeconfig's
    current context names."""

    @wrap(kubectl_plugin, "connect")
    def connect(original, args):
        api_client, _ = original(args)
        return api_client, args.namespace or "default"


@mutant("plugin-ignores-force", "FORCE-6.post", kind="plugin")
def plugin_ignores_force() -> None:
    """`kubectl convoy release sync NAME --force` sends the POST without force."""

    @wrap(kubectl_plugin, "sync")
    def sync(original, args):
        return dataclasses.replace(original(args), force=False)
