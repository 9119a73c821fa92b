"""The job's communicator: the one place hermes names ``MPI.COMM_WORLD``.

The ``run`` command's job and :func:`hermes.run` inside a job take it from here; every other layer receives its
communicator as an argument.
"""

from __future__ import annotations

import os

__all__ = ["world"]


def world():
    """The job's communicator, ``MPI.COMM_WORLD`` (MPI initialised on first use).

    Open MPI does not start without ``HOME``: when it is unset, this process gets the account's home directory
    first (:func:`hermes.interpreter.account_home`), as every process hermes starts does."""
    if not os.environ.get("HOME"):
        from hermes.interpreter import account_home

        home = account_home()
        if home is not None:
            os.environ["HOME"] = home
    from mpi4py import MPI

    return MPI.COMM_WORLD
