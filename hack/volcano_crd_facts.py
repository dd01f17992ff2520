#!/usr/bin/env python3
"""Reduce one of Volcano's CRD files to the facts Scoria's CRDs must keep (tests/fixtures/volcano-crds/).

    hack/volcano_crd_facts.py VOLCANO_CRD.yaml SOURCE COMMIT > tests/fixtures/volcano-crds/<plural>.json

SOURCE names the file in Volcano's repository (e.g. ``volcano-sh/volcano config/crd/volcano/bases/...``),
COMMIT the commit it was read at.  The facts: every schema field's path (``.spec.tasks[].name``,
``{}`` for map values) and type, the printer columns and the subresources of the served version.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml


def fields(schema: dict, path: str = "") -> dict[str, str | None]:
    out = {path or ".": schema.get("type")}
    for key, sub in (schema.get("properties") or {}).items():
        out.update(fields(sub, f"{path}.{key}"))
    if isinstance(schema.get("items"), dict):
        out.update(fields(schema["items"], path + "[]"))
    if isinstance(schema.get("additionalProperties"), dict):
        out.update(fields(schema["additionalProperties"], path + "{}"))
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    path, source, commit = argv
    crd = next(d for d in yaml.safe_load_all(Path(path).read_text()) if d)
    (version,) = [v for v in crd["spec"]["versions"] if v.get("storage")]
    facts = {
        "note": "What the CRD defines, reduced to facts: each schema field's path and type, printer columns, "
                "subresources",
        "source": source, "commit": commit, "group": crd["spec"]["group"], "kind": crd["spec"]["names"]["kind"],
        "version": version["name"],
        "printerColumns": [{k: c[k] for k in ("name", "type", "jsonPath")}
                           for c in version.get("additionalPrinterColumns", [])],
        "subresources": version.get("subresources") or {},
        "fields": dict(sorted(fields(version["schema"]["openAPIV3Schema"]).items())),
    }
    json.dump(facts, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
