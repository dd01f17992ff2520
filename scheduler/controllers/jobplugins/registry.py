"""The one registry of Job plugins: name -> class, duplicates refused (Volcano's plugins/factory.go).

``hcclrank`` (Huawei Ascend ranks) is Volcano's too but not Scoria's: a Job naming it is refused at
apply as an unknown plugin, as Volcano's webhook refuses any name it does not know.
"""

from __future__ import annotations

from scheduler.controllers.jobplugins.base import ArgumentError, JobPlugin
from scheduler.controllers.jobplugins.env import EnvPlugin
from scheduler.controllers.jobplugins.mpi import MpiPlugin
from scheduler.controllers.jobplugins.pytorch import PytorchPlugin
from scheduler.controllers.jobplugins.ray import RayPlugin
from scheduler.controllers.jobplugins.ssh import SshPlugin
from scheduler.controllers.jobplugins.svc import SvcPlugin
from scheduler.controllers.jobplugins.tensorflow import TensorflowPlugin

PLUGINS: dict[str, type[JobPlugin]] = {}


def register(cls: type[JobPlugin]) -> None:
    if not cls.name:
        raise ValueError(f"{cls.__name__} has no name")
    if cls.name in PLUGINS:
        raise ValueError(f"job plugin {cls.name!r} is registered twice ({PLUGINS[cls.name].__name__}, {cls.__name__})")
    PLUGINS[cls.name] = cls


for _cls in (SshPlugin, EnvPlugin, SvcPlugin, TensorflowPlugin, MpiPlugin, PytorchPlugin, RayPlugin):
    register(_cls)


def build(name: str, arguments: tuple[str, ...]) -> JobPlugin:
    """The plugin ``name`` with its arguments parsed; KeyError for an unknown name, ArgumentError for bad arguments."""
    return PLUGINS[name](arguments)


__all__ = ["PLUGINS", "register", "build", "ArgumentError", "JobPlugin"]
