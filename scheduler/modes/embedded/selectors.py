"""``-l``: label selectors as kubectl writes them, read into a :class:`~scheduler.api.objects.LabelSelector`.

Requirements separated by commas, all of which must hold: ``key=value`` (also ``==``), ``key!=value``,
``key in (a,b)``, ``key notin (a,b)``, ``key`` (the label exists) and ``!key`` (it does not).  As in
Kubernetes, ``!=`` and ``notin`` also match objects without the label.
"""

from __future__ import annotations

import re

from proto.errors import InputError
from scheduler.api.objects import LabelSelector, Requirement

_KEY = r"[A-Za-z0-9](?:[-A-Za-z0-9_./]*[A-Za-z0-9])?"
_VALUE = r"(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?)?"
_SET = re.compile(rf"\s*(?P<key>{_KEY})\s+(?P<op>in|notin)\s+\((?P<values>[^()]*)\)\s*")
_EQUAL = re.compile(rf"\s*(?P<key>{_KEY})\s*(?P<op>==|=|!=)\s*(?P<value>{_VALUE})\s*")
_EXISTS = re.compile(rf"\s*(?P<not>!?)\s*(?P<key>{_KEY})\s*")
_TERM = re.compile(r"[^,(]+(\([^)]*\))?")


def parse_selector(text: str) -> LabelSelector:
    """The selector ``text`` says; InputError naming the term that is not one."""
    reqs: list[Requirement] = []
    for match in _TERM.finditer(text):
        term = match.group(0)
        if not term.strip():
            continue
        if m := _SET.fullmatch(term):
            values = tuple(v.strip() for v in m["values"].split(",") if v.strip())
            if not values or not all(re.fullmatch(_VALUE, v) for v in values):
                raise InputError(f"-l {text!r}: {term.strip()!r}: expected a list of label values in the parentheses")
            reqs.append(Requirement(m["key"], "In" if m["op"] == "in" else "NotIn", values))
        elif m := _EQUAL.fullmatch(term):
            reqs.append(Requirement(m["key"], "NotIn" if m["op"] == "!=" else "In", (m["value"],)))
        elif m := _EXISTS.fullmatch(term):
            reqs.append(Requirement(m["key"], "DoesNotExist" if m["not"] else "Exists"))
        else:
            raise InputError(f"-l {text!r}: {term.strip()!r} is not a label requirement (key=value, key!=value, "
                             "key in (a,b), key notin (a,b), key or !key)")
    rest = _TERM.sub("", text).replace(",", "").strip()
    if rest:
        raise InputError(f"-l {text!r}: cannot read {rest!r}")
    return LabelSelector(match_expressions=tuple(reqs))
