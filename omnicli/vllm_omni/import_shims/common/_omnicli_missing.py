"""What the stand-in packages share: placeholders that fail when used, and stand-in submodules.

transformers treats torchvision as installed once it can be found, and then
imports submodules such as `torchvision.io` at import time; `StandInFinder`
answers any `torchvision.*` submodule that has no file here with an empty
module whose attributes are placeholders.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import types


class MissingFeature:
    """A placeholder for an attribute of a package that is not installed: an error at use, not at import."""

    def __init__(self, qualname: str):
        self._qualname = qualname

    def __call__(self, *args, **kwargs):
        raise ModuleNotFoundError(
            f"{self._qualname} is not available: the real package is not installed and omnicli's vLLM-Omni "
            "import shim provides only what the TTS pipelines use (docs/vllm-omni.md)"
        )

    def __getattr__(self, name: str) -> MissingFeature:
        if name.startswith("__"):
            raise AttributeError(name)
        return MissingFeature(f"{self._qualname}.{name}")

    def __mro_entries__(self, bases):  # `class X(torchvision.Foo)` at import time still works
        return (object,)


def module_getattr(module_name: str):
    def __getattr__(name: str) -> MissingFeature:
        if name.startswith("__"):
            raise AttributeError(name)
        return MissingFeature(f"{module_name}.{name}")

    return __getattr__


class StandInFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Empty stand-in modules for the submodules of one stand-in package that have no file of their own."""

    def __init__(self, package: str):
        self.package = package

    def find_spec(self, fullname, path=None, target=None):
        # Last on sys.meta_path: asked only when no file (of the stand-in or a real package) matched.
        if not fullname.startswith(self.package + "."):
            return None
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec):
        module = types.ModuleType(spec.name, "omnicli stand-in (docs/vllm-omni.md)")
        module.__path__ = []
        module.__getattr__ = module_getattr(spec.name)
        return module

    def exec_module(self, module):
        pass


def install_finder(package: str) -> None:
    if not any(isinstance(f, StandInFinder) and f.package == package for f in sys.meta_path):
        sys.meta_path.append(StandInFinder(package))
