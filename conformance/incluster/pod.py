"""The in-cluster Job's entrypoint: the suite against the cluster the pod runs in.

python -P -m conformance.incluster.pod [--command run|certify] --witness-service NS/NAME:PORT
    --workers N [--controller-deployment NS/NAME] -- [pytest arguments]

It writes a kubeconfig from the pod's ServiceAccount, runs `convoy-conformance run` (or
`certify`) on the
existing provider with the witness behind the Service, then writes the report directory and
pytest's exit code into a ConfigMap of its namespace (the caller reads it there) and exits
with that code.
"""

from __future__ import annotations

import argparse
import io
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import yaml
from kubernetes import client

from conformance.clusters.kubeconfig import api_client
from conformance.incluster import objects

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
#: A ConfigMap holds at most 1 MiB; a report is far below (the HTML compresses well).
ARCHIVE_LIMIT = 900 * 1024


def service_account_kubeconfig(
    host: str, port: str, credentials: Path = SERVICE_ACCOUNT_DIR
) -> dict:
    """The pod's own credentials as a kubeconfig (kubectl convoy reads one too). The server
    is the kubernetes Service's address, not its DNS name: a cluster may run no DNS."""
    server = f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}"
    name = "in-cluster"
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": name,
                "cluster": {"server": server, "certificate-authority": str(credentials / "ca.crt")},
            }
        ],
        "users": [{"name": name, "user": {"tokenFile": str(credentials / "token")}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
        "current-context": name,
    }


def suite_argv(kubeconfig: Path, reports: Path, args: argparse.Namespace) -> list[str]:
    """`convoy-conformance run` (or `certify`) on this cluster, the witness behind the run's
    Service."""
    argv = [sys.executable, "-P", "-m", "conformance.cli", args.command, f"--report-dir={reports}"]
    if args.command == "certify":
        argv += ["--workers", str(args.workers)]
    elif args.workers > 1:
        argv += ["-n", str(args.workers)]
    argv += ["--cluster=existing", f"--kubeconfig={kubeconfig}", "--convoy-install=none"]
    argv.append(f"--witness-service={args.witness_service}")
    if args.controller_deployment:
        argv.append(f"--convoy-controller-deployment={args.controller_deployment}")
    return [*argv, *args.pytest_args]


def archive(directory: Path) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        tar.add(directory, arcname=".")
    return buffer.getvalue()


def publish(api: client.ApiClient, namespace: str, reports: Path, exit_code: int) -> None:
    reports.mkdir(parents=True, exist_ok=True)  # a suite that never started wrote none
    packed = archive(reports)
    if len(packed) > ARCHIVE_LIMIT:
        raise SystemExit(
            f"the report directory is {len(packed)} bytes packed, above the "
            f"{ARCHIVE_LIMIT} a ConfigMap can carry: the report stays in the pod's log only"
        )
    body = objects.report_configmap(namespace, packed, exit_code)
    client.CoreV1Api(api).create_namespaced_config_map(namespace, body)
    print(f"in-cluster: report ({len(packed)} bytes) in configmap {objects.REPORT_CONFIGMAP}")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line conformance.incluster.objects.pod_args writes."""
    parser = argparse.ArgumentParser(prog="python -m conformance.incluster.pod")
    parser.add_argument("--command", choices=["run", "certify"], default="run")
    parser.add_argument("--witness-service", required=True)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--controller-deployment")
    parser.add_argument("pytest_args", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    if args.pytest_args[:1] == ["--"]:
        args.pytest_args = args.pytest_args[1:]
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    scratch = Path(objects.SCRATCH)
    kubeconfig = scratch / "kubeconfig"
    env = os.environ
    document = service_account_kubeconfig(
        env["KUBERNETES_SERVICE_HOST"], env["KUBERNETES_SERVICE_PORT"]
    )
    kubeconfig.write_text(yaml.safe_dump(document))
    reports = scratch / "reports"
    code = subprocess.run(suite_argv(kubeconfig, reports, args), check=False).returncode
    namespace = (SERVICE_ACCOUNT_DIR / "namespace").read_text().strip()
    with api_client(kubeconfig, scratch) as api:
        publish(api, namespace, reports, code)
    return code


if __name__ == "__main__":
    sys.exit(main())
