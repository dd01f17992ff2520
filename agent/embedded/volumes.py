"""A pod's volumes as the local runtime gives them: files written where its containers mount them.

Parsed from the pod manifest and the ConfigMaps and Secrets its START carries
(:mod:`proto.vocab.podcontext`), pure (:func:`parse_volumes`, :func:`parse_mounts`); written under the
pod's files folder by :func:`materialise`.

* ``configMap`` — each key a file (``data`` as text, ``binaryData`` base64), or only the ``items`` named
  (``key`` → ``path``, ``mode``); ``defaultMode`` (0644) for the rest; ``optional`` lets a missing
  ConfigMap (or key) be an empty volume.
* ``secret`` — the same, from the Secret's base64 ``data`` (``secretName``).
* ``emptyDir`` — an empty folder, kept across container restarts, gone with the pod.
* ``hostPath`` — the host's own path (``type``: ``Directory``, ``DirectoryOrCreate``, ``File``,
  ``FileOrCreate`` checked or made as the kubelet does; others unchecked).

Any other source (``persistentVolumeClaim``, ``downwardAPI``, ``projected``, ...) is Unsupported once a
container mounts it.  A mount (``volumeMounts[]``: ``mountPath``, ``subPath``, ``readOnly``) is bound in
the container's own mount namespace (:mod:`.podns`); ConfigMap and Secret volumes are read-only, as in
Kubernetes.  A ConfigMap or Secret that changes later is not written again into a running pod.
"""

from __future__ import annotations

import base64
import binascii
import os
import posixpath
import shutil
from dataclasses import dataclass
from pathlib import Path

from proto.errors import InputError

CONFIG_ERROR = "CreateContainerConfigError"  # the kubelet's reason for a missing ConfigMap/Secret or key
DEFAULT_MODE = 0o644
SOURCES = ("configMap", "secret", "emptyDir", "hostPath")
HOST_PATH_TYPES = ("", "Directory", "DirectoryOrCreate", "File", "FileOrCreate", "Socket", "CharDevice",
                   "BlockDevice")


class VolumeError(InputError):
    """A volume or mount the runtime cannot give the pod: ``reason`` (InvalidPod, Unsupported,
    CreateContainerConfigError) and a message naming it."""

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason, self.message = reason, message


@dataclass(frozen=True)
class Volume:
    name: str
    source: str                                   # configMap, secret, emptyDir, hostPath, or the unsupported kind
    files: tuple[tuple[str, bytes, int], ...] = ()  # configMap/secret: (relative path, content, mode)
    path: str = ""                                # hostPath
    path_type: str = ""                           # hostPath's type

    @property
    def supported(self) -> bool:
        return self.source in SOURCES

    @property
    def read_only(self) -> bool:
        return self.source in ("configMap", "secret")


@dataclass(frozen=True)
class VolumeMount:
    volume: str
    mount_path: str
    sub_path: str = ""
    read_only: bool = False


def parse_volumes(spec: dict, config_maps: dict, secrets: dict) -> dict[str, Volume]:
    """The pod's volumes by name; VolumeError for one that is malformed or names what does not exist."""
    out: dict[str, Volume] = {}
    for i, raw in enumerate(spec.get("volumes") or []):
        where = f"spec.volumes[{i}]"
        if not isinstance(raw, dict) or not isinstance(raw.get("name"), str) or not raw["name"]:
            raise VolumeError("InvalidPod", f"{where}: a volume needs a name")
        name = raw["name"]
        if name in out:
            raise VolumeError("InvalidPod", f"{where}: volume {name!r} is declared twice")
        kinds = [k for k in raw if k != "name"]
        kind = kinds[0] if len(kinds) == 1 else ""
        source = raw.get(kind) if kind else None
        if not kind or not isinstance(source, dict | None):
            raise VolumeError("InvalidPod", f"{where} ({name}): a volume needs exactly one source")
        source = source or {}
        if kind == "configMap":
            out[name] = Volume(name, kind, _files(source, config_maps.get(str(source.get("name") or "")),
                                                  f"volume {name}: configMap {source.get('name')!r}", binary=False))
        elif kind == "secret":
            out[name] = Volume(name, kind, _files(source, secrets.get(str(source.get("secretName") or "")),
                                                  f"volume {name}: secret {source.get('secretName')!r}", binary=True))
        elif kind == "hostPath":
            path, path_type = source.get("path"), source.get("type") or ""
            if not isinstance(path, str) or not path.startswith("/"):
                raise VolumeError("InvalidPod", f"volume {name}: hostPath.path must be an absolute path")
            if path_type not in HOST_PATH_TYPES:
                raise VolumeError("Unsupported", f"volume {name}: hostPath.type {path_type!r} is not supported")
            out[name] = Volume(name, kind, path=posixpath.normpath(path), path_type=path_type)
        else:
            out[name] = Volume(name, kind)
    return out


def _files(source: dict, obj: dict | None, what: str, *, binary: bool) -> tuple[tuple[str, bytes, int], ...]:
    optional = bool(source.get("optional"))
    default_mode = _mode(source.get("defaultMode", DEFAULT_MODE), f"{what}: defaultMode")
    if obj is None:
        if optional:
            return ()
        raise VolumeError(CONFIG_ERROR, f"{what} not found")
    contents = _contents(obj, what, binary=binary)
    items = source.get("items")
    if not items:
        return tuple((key, value, default_mode) for key, value in sorted(contents.items()))
    out = []
    for k, item in enumerate(items):
        if not isinstance(item, dict) or not isinstance(item.get("key"), str) or not isinstance(item.get("path"), str):
            raise VolumeError("InvalidPod", f"{what}: items[{k}] needs a key and a path")
        if item["key"] not in contents:
            if optional:
                continue
            raise VolumeError(CONFIG_ERROR, f"{what}: key {item['key']!r} not found")
        path = _relative(item["path"], f"{what}: items[{k}].path")
        out.append((path, contents[item["key"]], _mode(item.get("mode", default_mode), f"{what}: items[{k}].mode")))
    return tuple(out)


def _contents(obj: dict, what: str, *, binary: bool) -> dict[str, bytes]:
    """A ConfigMap's ``data`` (text) and ``binaryData`` (base64), or a Secret's ``data`` (base64), as bytes."""
    out: dict[str, bytes] = {}
    sections = (("data", True),) if binary else (("data", False), ("binaryData", True))
    for section, encoded in sections:
        for key, value in (obj.get(section) or {}).items():
            if not isinstance(value, str):
                raise VolumeError("InvalidPod", f"{what}: {section}.{key} is not a string")
            try:
                out[str(key)] = base64.b64decode(value, validate=True) if encoded else value.encode()
            except (binascii.Error, ValueError):
                raise VolumeError("InvalidPod", f"{what}: {section}.{key} is not base64") from None
    return out


def _mode(value: object, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 0o777:
        raise VolumeError("InvalidPod", f"{where}: must be a file mode from 0 to 0777 (decimal 511), got {value!r}")
    return value


def _relative(path: str, where: str) -> str:
    norm = posixpath.normpath(path)
    if not path or path.startswith("/") or norm == ".." or norm.startswith("../"):
        raise VolumeError("InvalidPod", f"{where}: {path!r} must be a relative path inside the volume")
    return norm


def parse_mounts(container: dict, volumes: dict[str, Volume], where: str) -> tuple[VolumeMount, ...]:
    """A container's ``volumeMounts``, each naming a volume the runtime can give."""
    out: list[VolumeMount] = []
    seen: set[str] = set()
    for k, raw in enumerate(container.get("volumeMounts") or []):
        at = f"{where}: volumeMounts[{k}]"
        if not isinstance(raw, dict):
            raise VolumeError("InvalidPod", f"{at}: must be an object")
        name, path = raw.get("name"), raw.get("mountPath")
        if name not in volumes:
            raise VolumeError("InvalidPod", f"{at}: volume {name!r} is not declared in spec.volumes")
        if not volumes[name].supported:
            raise VolumeError("Unsupported", f"{at}: volume {name} ({volumes[name].source}) is not supported by the "
                                             "embedded runtime (configMap, secret, emptyDir and hostPath are)")
        if not isinstance(path, str) or not path.startswith("/") or posixpath.normpath(path) == "/":
            raise VolumeError("InvalidPod", f"{at}: mountPath must be an absolute path other than /")
        if any(c in path for c in ",:\n\0") or ".." in path.split("/"):
            raise VolumeError("Unsupported", f"{at}: mountPath {path!r}: ',', ':', '..' and control characters are "
                                             "not supported by the embedded runtime")
        path = posixpath.normpath(path)
        if path in seen:
            raise VolumeError("InvalidPod", f"{at}: {path} is mounted twice")
        seen.add(path)
        sub = raw.get("subPath") or ""
        if not isinstance(sub, str):
            raise VolumeError("InvalidPod", f"{at}: subPath must be a string")
        out.append(VolumeMount(name, path, _relative(sub, f"{at}.subPath") if sub else "",
                               bool(raw.get("readOnly")) or volumes[name].read_only))
    return tuple(out)


def materialise(root: Path, volumes: dict[str, Volume]) -> dict[str, Path]:
    """Write the volumes' files under ``root`` (a pod's volumes folder, made afresh); where each volume is.
    OSError when the disk refuses; VolumeError for a hostPath that is not what its type says."""
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(mode=0o700, parents=True)
    out: dict[str, Path] = {}
    for volume in volumes.values():
        if volume.source == "hostPath":
            out[volume.name] = _host_path(volume)
            continue
        if not volume.supported:
            continue
        folder = root / volume.name
        folder.mkdir(mode=0o755)
        os.chmod(folder, 0o755)
        for rel, content, mode in volume.files:
            path = folder / rel
            path.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
            try:
                os.write(fd, content)
                os.fchmod(fd, mode)
            finally:
                os.close(fd)
        out[volume.name] = folder
    return out


def _host_path(volume: Volume) -> Path:
    path = Path(volume.path)
    kind = volume.path_type
    if kind == "DirectoryOrCreate" and not path.exists():
        path.mkdir(mode=0o755, parents=True)
    elif kind == "FileOrCreate" and not path.exists():
        path.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
        path.touch(mode=0o644)
    if kind in ("Directory", "DirectoryOrCreate") and not path.is_dir():
        raise VolumeError(CONFIG_ERROR, f"volume {volume.name}: hostPath {path} is not a directory")
    if kind in ("File", "FileOrCreate") and not path.is_file():
        raise VolumeError(CONFIG_ERROR, f"volume {volume.name}: hostPath {path} is not a file")
    if kind in ("Socket", "CharDevice", "BlockDevice") and not path.exists():
        raise VolumeError(CONFIG_ERROR, f"volume {volume.name}: hostPath {path} does not exist")
    return path


def mount_source(volume_dirs: dict[str, Path], mount: VolumeMount) -> Path:
    """What a mount binds: the volume's folder, or its ``subPath`` (made as a folder when missing, as the kubelet
    does for a subPath that does not exist)."""
    base = volume_dirs[mount.volume]
    if not mount.sub_path:
        return base
    source = base / mount.sub_path
    if not source.exists() and not source.is_symlink():
        source.mkdir(mode=0o755, parents=True)
    return source
