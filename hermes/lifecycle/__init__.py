"""The run's lifecycle, one room: how a run is launched (:mod:`~hermes.runtime.launch`), checked before it
starts (:mod:`~hermes.lifecycle.preflight`), set up (:mod:`~hermes.lifecycle.setup`), sequenced phase by phase
(:mod:`~hermes.lifecycle.driver`, the steps in :mod:`~hermes.lifecycle.phase`, the state in
:mod:`~hermes.lifecycle.state`), watched (:mod:`~hermes.runtime.watchdog`), fed by the extra load and the
monitor (:mod:`~hermes.lifecycle.feed`), recorded (:mod:`~hermes.lifecycle.records`: what a run records) and
written (:mod:`~hermes.lifecycle.journal` as it goes, :mod:`~hermes.lifecycle.finish` at the end, into the run
directory of :mod:`~hermes.lifecycle.directory`), checkpointed and resumed (:mod:`~hermes.lifecycle.checkpoint`).

The decisions of a phase — when to balance, what a round is worth — are not here but beside the balancers
(:mod:`hermes.balance.policy`); the files any part of hermes writes (atomic writes, directory claims) are
:mod:`hermes.files`.
"""
