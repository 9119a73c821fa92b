"""``python -m hermes``: the command line. The current directory that ``-m`` put first on ``sys.path`` is removed
before anything else is imported (:func:`hermes.interpreter.drop_implicit_cwd`): a ``yaml.py`` where the user
stands is never imported in place of the real module."""

from hermes.interpreter import drop_implicit_cwd

drop_implicit_cwd()

from hermes.cli import main  # noqa: E402  (after the import path is cleaned)

raise SystemExit(main())
