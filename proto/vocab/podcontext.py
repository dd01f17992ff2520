"""What an embedded START carries beside the pod: its network identity, the names it must resolve, and the
ConfigMaps and Secrets it reads — the parts of a cluster a kubelet would look up, resolved by the scheduler.

The pod JSON of a START (:attr:`proto.model.PodAction.pod_json`) is the pod manifest with one more top-level
key, :data:`CONTEXT` (``"scoria"``)::

    "scoria": {
      "network": {"podIP": "10.213.0.7", "cidr": "10.213.0.0/16", "gateway": "10.213.0.1"},
      "hosts": [["10.213.0.7", ["train-master-0.train", "train-master-0.train.default.svc.cluster.local"]], ...],
      "configMaps": {"train-svc": {"data": {"master.host": "..."}, "binaryData": {}}},
      "secrets": {"train-ssh": {"data": {"id_rsa": "<base64>"}}}
    }

* ``network`` — the pod's address in the cluster's pod range (``cidr``); ``gateway`` is the host's address
  in that range (where a ``hostNetwork`` pod is reached from the others).  A ``hostNetwork`` pod's ``podIP``
  is the gateway.
* ``hosts`` — address and names of every pod and Service of the pod's namespace that has an address: what
  the pod's private ``/etc/hosts`` lists.  A START for a pod that runs already carries the table again when
  it changed (the runtime rewrites the file in place; nothing else of a running pod changes).
* ``configMaps`` / ``secrets`` — the objects the pod's volumes, ``env[].valueFrom`` and ``envFrom`` name, as
  stored (Secret ``data`` base64, as the API holds it); one that does not exist is absent.

Pure vocabulary: the scheduler writes it (:mod:`scheduler.modes.embedded`), the agent reads it
(:mod:`agent.embedded`).
"""

from __future__ import annotations

from typing import Any

CONTEXT = "scoria"
NETWORK, HOSTS, CONFIGMAPS, SECRETS = "network", "hosts", "configMaps", "secrets"
CLUSTER_DOMAIN = "cluster.local"
DEFAULT_POD_CIDR = "10.213.0.0/16"


def context_of(doc: dict) -> dict[str, Any]:
    """The context a START's pod JSON carries ({} when none, or when it is not an object)."""
    value = doc.get(CONTEXT)
    return value if isinstance(value, dict) else {}


def service_names(name: str, namespace: str) -> list[str]:
    """The names a Service (or a pod's ``hostname.subdomain``) answers to, short first, as DNS search
    paths would find it: ``name``, ``name.ns``, ``name.ns.svc``, ``name.ns.svc.cluster.local``."""
    return [name, f"{name}.{namespace}", f"{name}.{namespace}.svc", f"{name}.{namespace}.svc.{CLUSTER_DOMAIN}"]
