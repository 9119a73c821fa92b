"""The registry of balancers by name, and how a user's own balancer plugs in.

:data:`BALANCERS` is a mapping filled as the balancer modules of :mod:`hermes.balance` are imported: each registers
the balancers it defines with the decorator ``@register(name, params=..., serial=..., doc=...)`` on their ``run``
function (:meth:`Registry.add` is what the decorator calls). :data:`BUILTIN` says which module defines each
built-in name, so the registry knows every name without importing any balancer module, and imports the module
the first time one of its balancers is looked up: a run imports the balancer its scenario names and no other
(importing them all costs a second of CPU, scipy.optimize included, on every rank). Nothing here imports a
balancer module at import time, so there is no cycle.

A balancer defined outside hermes is found

- by **import path**: ``balancer.algorithm: mypkg.mymodule:MyBalancer`` (or ``mypkg.mymodule.MyBalancer``) in a
  scenario (or ``--set balancer.algorithm=...``), resolved by :func:`get_balancer`; its parameter section is
  keyed by that name as written (``balancer: {algorithm: 'mypkg.mymodule:MyBalancer', 'mypkg.mymodule:MyBalancer':
  {...}}``), or its parameters go flat under ``balancer:``;
- by **entry point**: a package declares ``[project.entry-points."hermes.balancers"] mydiff =
  "mypkg.mymodule:MyBalancer"``; :func:`get_balancer` looks entry points up when a name is not built in,
  and :func:`all_balancers` lists them beside the built-ins.

The object behind the path or entry point is a :class:`~hermes.balance.interface.BalancerInfo`, a class
with a ``run(self, ctx)`` method (instantiated without arguments; its ``Params`` attribute, if any, is the
parameter model and its docstring's first line the description; an optional ``serial(self, model, *,
links=None, **params)`` is its serial reference) or a plain function ``run(ctx) -> Decision`` without
parameters.

Importing a plug-in runs its code, which may hang or end the process. The launcher therefore validates a
scenario with plug-ins deferred (:func:`plugins_deferred`: a plug-in's name is checked for form and existence
without importing it, its parameters taken as given, :class:`DeferredParams`) and imports them last, after every
other check, in a child process under a time limit (:mod:`hermes.lifecycle.plugins`).
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import logging
from collections.abc import Callable, Iterator, MutableMapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import replace
from importlib.metadata import entry_points
from typing import Any

from pydantic import ConfigDict

from hermes.balance.interface import BalanceContext, BalancerInfo, Decision, NoParams, Params
from hermes.errors import BalancerError

__all__ = ["Registry", "BALANCERS", "BUILTIN", "register", "get_balancer", "check_params", "all_balancers",
           "mesh_balancers", "from_object", "ENTRY_POINT_GROUP", "plugins_deferred", "DeferredParams", "is_deferred", "is_plugin"]

log = logging.getLogger(__name__)

#: the entry-point group a package uses to offer balancers to hermes
ENTRY_POINT_GROUP = "hermes.balancers"


#: the built-in balancers by name: the module that defines and registers each (imported on first look-up)
BUILTIN: dict[str, str] = {
    "chebyshev": "hermes.balance.diffusion.chebyshev",
    **{f"gda{k}": "hermes.balance.diffusion.gda" for k in range(7)},
    **dict.fromkeys(("sos", "sos_opt"), "hermes.balance.diffusion.sos"),
    **dict.fromkeys(("implicit", "implicit_watts"), "hermes.balance.diffusion.implicit"),
    "grapevine": "hermes.balance.gossip.grapevine",
    "pcg": "hermes.balance.potential.pcg",
    **dict.fromkeys(("lps", "lpa"), "hermes.balance.polynomial.lps"),
    "mpa": "hermes.balance.polynomial.mpa",
    "auto": "hermes.balance.potential.auto",
    "ada": "hermes.balance.polynomial.ada",
    "mincost": "hermes.balance.potential.mincost",
    "fos": "hermes.balance.diffusion.fos",
    **dict.fromkeys(("none", "metis"), "hermes.balance.repartition.metis"),
    "scotch": "hermes.balance.repartition.scotch",
    "informandtransfer": "hermes.trace.informandtransfer",
}


class Registry(MutableMapping[str, BalancerInfo]):
    """Balancers by name. :meth:`add` registers a new name (a name taken twice is a programming error);
    ``BALANCERS[name] = info`` registers or replaces one entry, ``del BALANCERS[name]`` removes it.

    ``modules`` names the module that registers each name not yet registered: the registry lists such a name
    and imports its module the first time the name is looked up."""

    def __init__(self, modules: dict[str, str] | None = None) -> None:
        self._entries: dict[str, BalancerInfo | None] = dict.fromkeys(modules or {})  # None: not imported yet
        self._modules = dict(modules or {})

    def add(self, info: BalancerInfo) -> BalancerInfo:
        """Register ``info`` under ``info.name``.

        Raises
        ------
        ValueError
            If the name is taken (a programming error, not a user's).
        """
        if self._entries.get(info.name) is not None:
            raise ValueError(f"balancer {info.name!r} registered twice")
        self._entries[info.name] = info
        self._modules.pop(info.name, None)
        return info

    def __setitem__(self, name: str, info: BalancerInfo) -> None:
        if not isinstance(info, BalancerInfo):
            raise TypeError(f"a registry entry is a BalancerInfo, got {type(info).__name__}")
        self._entries[name] = info if info.name == name else replace(info, name=name)
        self._modules.pop(name, None)

    def __delitem__(self, name: str) -> None:
        del self._entries[name]
        self._modules.pop(name, None)

    def __getitem__(self, name: str) -> BalancerInfo:
        info = self._entries[name]
        if info is None:
            importlib.import_module(self._modules[name])  # the family registers its balancers (add)
            info = self._entries.get(name)
            if info is None:  # the table and the family disagree: a programming error
                raise LookupError(f"balancer {name!r}: {self._modules[name]} does not register it")
        return info

    def __contains__(self, name: object) -> bool:
        return name in self._entries  # a name is known without importing its family

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)


#: the built-in balancers (each family module fills its entries when a look-up first imports it)
BALANCERS = Registry(BUILTIN)


def register(name: str, *, params: type[Params] = NoParams, doc: str = "",
             serial: Callable[..., Any] | None = None,
             replay_only: bool = False) -> Callable[[Callable[[BalanceContext], Decision]], Any]:
    """Decorator: register ``run`` as the balancer ``name`` in :data:`BALANCERS` (returns ``run`` unchanged);
    ``replay_only``: it balances a trace's tasks (``hermes trace replay``), never a running mesh."""

    def deco(run: Callable[[BalanceContext], Decision]):
        BALANCERS.add(BalancerInfo(name, run, params, doc, serial, replay_only))
        return run

    return deco


def from_object(name: str, obj: Any) -> BalancerInfo:
    """A :class:`BalancerInfo` from what an import path or entry point names (module docstring)."""
    if isinstance(obj, BalancerInfo):
        return obj
    if inspect.isclass(obj):
        if not callable(getattr(obj, "run", None)):  # checked before the class is instantiated (its code runs)
            raise BalancerError(f"balancer {name!r}: {obj.__name__} is not a balancer (a class with a method "
                                f"run(self, ctx), or a function run(ctx))")
        try:
            inst = obj()
        except Exception as err:  # a user's class: say what went wrong in one line
            raise BalancerError(f"balancer {name!r}: cannot instantiate {obj.__name__} ({_line(err)})") from None
        run = getattr(inst, "run", None)
        if not callable(run) or not _takes_one(run):
            raise BalancerError(f"balancer {name!r}: {obj.__name__}.run must take one argument, the context "
                                f"(run(self, ctx))")
        params = getattr(obj, "Params", NoParams)
        if not (inspect.isclass(params) and issubclass(params, Params)):
            raise BalancerError(f"balancer {name!r}: {obj.__name__}.Params must derive from hermes.balance.Params")
        doc = (inspect.getdoc(obj) or "").strip().splitlines()[:1]
        serial = getattr(inst, "serial", None)
        return BalancerInfo(name, run, params, doc[0] if doc else "", serial if callable(serial) else None)
    if inspect.isfunction(obj):
        if not _takes_one(obj):
            raise BalancerError(f"balancer {name!r}: the function {obj.__name__} must take one argument, the "
                                f"context (run(ctx))")
        doc = (inspect.getdoc(obj) or "").strip().splitlines()[:1]
        return BalancerInfo(name, obj, NoParams, doc[0] if doc else "")
    kind = "a built-in function" if inspect.isbuiltin(obj) else type(obj).__name__
    raise BalancerError(f"balancer {name!r}: {kind} is not a balancer (a class with a method run(self, ctx), or a "
                        f"function run(ctx) written in Python)")


def _takes_one(fn) -> bool:
    """Whether ``fn`` can be called with one positional argument (the context) and needs no other."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return False
    try:
        sig.bind(object())
    except TypeError:
        return False
    return True


def _line(err: BaseException) -> str:
    """An exception as one short line."""
    text = " ".join(str(err).split())[:200]
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


def _import_path(path: str) -> BalancerInfo:
    module, _, attr = path.partition(":")
    if not module or not attr:
        raise BalancerError(f"balancer {path!r}: an import path looks like 'package.module:Name'")
    try:
        mod = importlib.import_module(module)
    except (Exception, SystemExit) as err:  # a plug-in that fails while it is imported: one line, never a traceback
        raise BalancerError(f"balancer {path!r}: cannot import {module} ({_line(err)})") from None
    obj = mod
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except Exception:  # noqa: BLE001 - a missing attribute, or a property of the user's that raises
            raise BalancerError(f"balancer {path!r}: {module} has no attribute {attr!r}") from None
    return from_object(path, obj)


def _plugins() -> dict[str, Any]:
    """The entry points of the group :data:`ENTRY_POINT_GROUP` by name (not loaded)."""
    return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}


def _load_plugin(name: str, ep) -> BalancerInfo:
    try:
        obj = ep.load()
    except (Exception, SystemExit) as err:  # a broken plugin must not take hermes down with a traceback
        raise BalancerError(f"balancer {name!r}: its entry point {ep.value} fails to load ({_line(err)})") from None
    return from_object(name, obj)


#: set while plug-ins are deferred (:func:`plugins_deferred`)
_DEFERRED: ContextVar[bool] = ContextVar("hermes_plugins_deferred", default=False)


@contextmanager
def plugins_deferred():
    """While this context lasts, :func:`get_balancer` and :func:`all_balancers` import no plug-in: a plug-in's name
    (an import path of the right form, an installed entry point's name) gives a stand-in whose parameters are
    taken as given (:class:`DeferredParams`); a name that cannot be a balancer is still refused in one line.

    The launcher validates a scenario this way, then imports the plug-ins last in a child process
    (:func:`hermes.lifecycle.plugins.check_plugins`)."""
    token = _DEFERRED.set(True)
    try:
        yield
    finally:
        _DEFERRED.reset(token)


class DeferredParams(Params):
    """The parameters of a plug-in not imported yet: any key is taken as given, to be checked when it is."""

    model_config = ConfigDict(extra="allow", frozen=True)


def is_deferred(info: BalancerInfo) -> bool:
    """Whether ``info`` stands in for a plug-in not imported yet (:func:`plugins_deferred`)."""
    return inspect.isclass(info.params) and issubclass(info.params, DeferredParams)


def is_plugin(name: Any) -> bool:
    """Whether ``name`` names a balancer that is not built in (a plug-in: its import runs code not hermes')."""
    return isinstance(name, str) and name not in BUILTIN


def _stand_in(name: str) -> BalancerInfo:
    def run(ctx: BalanceContext) -> Decision:
        raise BalancerError(f"balancer {name!r}: the plug-in was never imported (its check was deferred)")

    return BalancerInfo(name, run, DeferredParams, "a plug-in, imported after every other check")


def _deferred(name: str) -> BalancerInfo:
    """:func:`get_balancer` while plug-ins are deferred, for a name that is not built in."""
    if ":" in name:
        module, _, attr = name.partition(":")
        if not module or not attr:
            raise BalancerError(f"balancer {name!r}: an import path looks like 'package.module:Name'")
        return _stand_in(name)
    plugins = _plugins()
    module, _, attr = name.rpartition(".")
    if name in plugins or (module and attr and all(p.isidentifier() for p in name.split("."))):
        return _stand_in(name)
    raise _unknown(name, plugins)


def _unknown(name: str, plugins) -> BalancerError:
    """The one line for a balancer name that is none: the closest names, then every valid one."""
    from hermes.suggest import did_you_mean

    valid = sorted({*BALANCERS, *plugins})
    return BalancerError(f"unknown balancer {name!r}{did_you_mean(name, valid)}; valid: {', '.join(valid)} (or an "
                         f"import path 'package.module:Name')")


def get_balancer(name: str) -> BalancerInfo:
    """The balancer called ``name``: built in, an entry point, or an import path ``package.module:Name``.

    While plug-ins are deferred (:func:`plugins_deferred`), a plug-in's name gives a stand-in instead: nothing is
    imported.

    Raises
    ------
    BalancerError
        If there is no such balancer (the message lists the valid names) or the plug-in is broken.
    """
    if not isinstance(name, str):
        raise BalancerError(f"balancer name must be a string, got {name!r}")
    if name in BALANCERS:
        return BALANCERS[name]
    if _DEFERRED.get():
        return _deferred(name)
    if ":" in name:
        return _import_path(name)
    plugins = _plugins()
    if name in plugins:
        return _load_plugin(name, plugins[name])
    module, _, attr = name.rpartition(".")
    if module and attr and _importable(module):  # package.module.Name: the import path, last dot for the colon
        return replace(_import_path(f"{module}:{attr}"), name=name)
    raise _unknown(name, plugins)


def _importable(module: str) -> bool:
    """Whether ``module`` can be found (its parent packages are imported to look; a failure there: False)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (Exception, SystemExit):  # noqa: BLE001 - a parent that fails to import, a malformed name
        return False


def mesh_balancers() -> list[str]:
    """The built-in balancers a mesh run can use (every one but those that balance a trace's tasks only,
    ``replay_only``), in registry order; looks each up (importing its family)."""
    return [name for name in BALANCERS if not BALANCERS[name].replay_only]


def all_balancers() -> dict[str, BalancerInfo]:
    """The built-ins and every installed plug-in by name (a broken plug-in is skipped with a warning; while
    plug-ins are deferred, :func:`plugins_deferred`, each is a stand-in and none is imported)."""
    out = dict(BALANCERS)
    for name, ep in sorted(_plugins().items()):
        if name in out:
            log.warning("plug-in balancer %r ignored: a built-in has that name", name)
            continue
        if _DEFERRED.get():
            out[name] = _stand_in(name)
            continue
        try:
            out[name] = _load_plugin(name, ep)
        except BalancerError as err:
            log.warning("%s", err)
    return out


def check_params(name: str, params: dict[str, Any] | None = None, *, prefix: str = "balancer.") -> dict[str, Any]:
    """Validate ``params`` for the balancer ``name``; the merged parameters (defaults filled in).

    Raises
    ------
    BalancerError
        Unknown balancer, unknown parameter or a bad value (one line naming the key).
    """
    return get_balancer(name).check(params, prefix=prefix)
