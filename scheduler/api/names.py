"""Names as Kubernetes validates them (k8s.io/apimachinery/pkg/util/validation), so that every object
Scoria accepts can be named again: in a path of the control API, a file name, a cgroup, a label selector.

Each check returns ``None`` for a good value, else the problem in Kubernetes' words.
"""

from __future__ import annotations

import re
from functools import lru_cache

DNS1123_LABEL_MAX = 63
DNS1123_SUBDOMAIN_MAX = 253
LABEL_VALUE_MAX = 63
ANNOTATIONS_MAX_BYTES = 256 * 1024  # all of an object's annotations, keys and values (TotalAnnotationSizeLimitB)
UID_MAX = 128

_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_LABEL = re.compile(rf"{_LABEL}\Z")
_DNS1123_SUBDOMAIN = re.compile(rf"{_LABEL}(\.{_LABEL})*\Z")
_QUALIFIED_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]\Z")
_UID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*\Z")  # the agent's rule: a uid names files and cgroups
#: the checks below are pure, and the same keys and names come again and again (every pod of a Job carries the
#: same label and annotation keys): each remembers its latest answers
_REMEMBERED = 4096


def _shown(value: str) -> str:
    return repr(value if len(value) <= 80 else value[:60] + "…")


@lru_cache(maxsize=_REMEMBERED)
def dns1123_label(value: str) -> str | None:
    """Namespaces (and container names): ``my-name``, at most 63 characters."""
    if len(value) > DNS1123_LABEL_MAX:
        return f"must be no more than {DNS1123_LABEL_MAX} characters, got {len(value):,}"
    if not _DNS1123_LABEL.match(value):
        return (f"{_shown(value)} is not a lowercase RFC 1123 label: lower case alphanumeric characters or '-', "
                "starting and ending with an alphanumeric character (e.g. 'my-name')")
    return None


@lru_cache(maxsize=_REMEMBERED)
def dns1123_subdomain(value: str) -> str | None:
    """Most object names (Pod, Node, PriorityClass, PodGroup, Queue): ``example.com``, at most 253 characters."""
    if len(value) > DNS1123_SUBDOMAIN_MAX:
        return f"must be no more than {DNS1123_SUBDOMAIN_MAX} characters, got {len(value):,}"
    if not _DNS1123_SUBDOMAIN.match(value):
        return (f"{_shown(value)} is not a lowercase RFC 1123 subdomain: lower case alphanumeric characters, '-' "
                "or '.', starting and ending with an alphanumeric character (e.g. 'example.com')")
    return None


@lru_cache(maxsize=_REMEMBERED)
def qualified_name(value: str) -> str | None:
    """Label and annotation keys: ``name`` or ``prefix/name`` (prefix a DNS subdomain, name at most 63)."""
    prefix, slash, name = value.rpartition("/")
    if slash and not prefix:
        return f"{_shown(value)}: the prefix before '/' must not be empty"
    if prefix and (problem := dns1123_subdomain(prefix)):
        return f"prefix part {problem}"
    if not name:
        return f"{_shown(value)}: the name part must not be empty"
    if len(name) > DNS1123_LABEL_MAX:
        return f"name part must be no more than {DNS1123_LABEL_MAX} characters, got {len(name):,}"
    if not _QUALIFIED_NAME.match(name) or value.count("/") > 1:
        return (f"{_shown(value)} is not a qualified name: alphanumeric characters, '-', '_' or '.', starting and "
                "ending with an alphanumeric character, with an optional DNS subdomain prefix and '/' "
                "(e.g. 'example.com/MyName')")
    return None


@lru_cache(maxsize=_REMEMBERED)
def label_value(value: str) -> str | None:
    """Label values: empty, or at most 63 characters like a qualified name's name part."""
    if len(value) > LABEL_VALUE_MAX:
        return f"must be no more than {LABEL_VALUE_MAX} characters, got {len(value):,}"
    if value and not _QUALIFIED_NAME.match(value):
        return (f"{_shown(value)} is not a valid label value: empty, or alphanumeric characters, '-', '_' or '.', "
                "starting and ending with an alphanumeric character")
    return None


def env_var_name(value: str) -> str | None:
    """A container's environment variable name (Kubernetes' relaxed rule, the default since 1.32)."""
    if not value:
        return "must not be empty"
    if any(not " " <= ch <= "~" or ch == "=" for ch in value):
        return (f"{_shown(value)} is not a valid environment variable name: printable ASCII characters other "
                "than '=' only")
    return None


def uid(value: str) -> str | None:
    """A pod's uid (Kubernetes sets a UUID; the embedded runtime names files and cgroups after it)."""
    if len(value) > UID_MAX:
        return f"must be no more than {UID_MAX} characters, got {len(value):,}"
    if not _UID.match(value) or ".." in value:
        return (f"{_shown(value)} is not a valid uid: letters, digits, '.', '_' or '-', starting with a letter "
                "or digit (Kubernetes gives a UUID)")
    return None
