"""Traces of real applications: DARMA vt's LBDatafile, read and written completely, and balancers replayed on them.

:mod:`hermes.trace.lbdatafile` reads every phase of a per-rank LBDatafile trace (plain or brotli-compressed JSON,
vt's own output and LBAF's input) into :class:`~hermes.trace.trace_phase.Trace` and writes one back;
:mod:`hermes.trace.workmodel` computes the per-rank figures LBAF reports (load, communication, memory, the
affine work model); :mod:`hermes.trace.replay` runs any balancer of the registry on a trace's phases
(``hermes trace replay``; :mod:`hermes.trace.replay_report` writes its directory); :mod:`hermes.trace.trace_experiment`
sweeps balancers and replay options over a trace (``hermes compare --trace``); :mod:`hermes.trace.record` writes a
hermes run as a trace (``output.lbdatafile``, ``hermes trace write``). docs/TRACES.md.
"""

from hermes.trace.lbdatafile import parse_phase_spec, read_trace, write_trace
from hermes.trace.trace_phase import Trace, TraceError, TracePhase

__all__ = ["Trace", "TracePhase", "TraceError", "read_trace", "write_trace", "parse_phase_spec"]
